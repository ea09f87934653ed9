"""errkb.advisors.environment.verdicts: each situation's verdicts and the commands computed for its machine.

Every environment is built from the real readings the probes return (tests/environments.py);
the commands come from the shipped knowledge tables, so a test fails when a table row or the
choice of build changes.
"""

from __future__ import annotations

import pytest
from environments import GIB, environment, gpus, stack, torch_build

from errkb.advisors.environment.verdicts import judge, rebuild_command
from errkb.doctor import Checkup
from errkb.probes.extensions import Extension
from errkb.probes.stack import Broken
from errkb.probes.torch_build import TorchBuild

WHL = "https://download.pytorch.org/whl"
CU126_ARCHS = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
CU129_ARCHS = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
WINDOWS = "Windows-10-10.0.19045-SP0"


BNB_INSTALL = "pip install --force-reinstall --no-deps bitsandbytes=="


def _bnb_cpu(name: str) -> Extension:
    """bitsandbytes 0.45.5's CPU library, loaded (the extension probe's reading)."""
    return Extension(distribution="bitsandbytes", version="0.45.5", kind="library", name=name,
                     path=f"/site/bitsandbytes/{name}", error=None)  # fmt: skip


def _ext(dist: str, version: str, error: str, name: str = "_C") -> Extension:
    return Extension(
        distribution=dist,
        version=version,
        kind="module",
        name=name,
        path=f"/site/{name}.so",
        error=error,
    )


SITUATIONS = {
    "rtx-5090-on-a-cu126-build": (
        environment(
            nvml=gpus(("NVIDIA GeForce RTX 5090", (12, 0)), driver="570.86.15", cuda=12080)
        ),
        [
            (
                "gpu-arch-unsupported",
                "broken",
                (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129",),
            )
        ],
    ),
    "rtx-5090-with-a-cuda-13-driver": (
        environment(
            nvml=gpus(("NVIDIA GeForce RTX 5090", (12, 0)), driver="580.65.06", cuda=13000)
        ),
        [
            (
                "gpu-arch-unsupported",
                "broken",
                (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu130",),
            )
        ],
    ),
    "h100-on-a-cu126-build-is-fine": (
        environment(nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0)))),
        [],
    ),
    "cpu-torch-on-an-a10-with-torchvision": (
        environment(
            nvml=gpus(("NVIDIA A10", (8, 6)), driver="550.54.15", cuda=12040),
            torch=torch_build("2.13.0+cpu", cuda=None),
            installed=stack(("torch", "2.13.0+cpu"), ("torchvision", "0.28.0+cpu")),
        ),
        [
            (
                "cpu-torch-with-gpu",
                "broken",
                (
                    (
                        "pip install --force-reinstall torch==2.13.0 torchvision==0.28.0 "
                        f"--index-url {WHL}/cu126"
                    ),
                ),
            )
        ],
    ),
    "cpu-torch-and-no-gpu": (
        environment(nvml=None, torch=torch_build("2.13.0+cpu", cuda=None)),
        [("no-gpu", "note", ()), ("cpu-torch", "note", ())],
    ),
    "cpu-torch-on-a-gh200-arm-machine": (
        environment(
            nvml=gpus(("NVIDIA GH200 480GB", (9, 0)), driver="580.65.06", cuda=13000),
            torch=torch_build("2.13.0+cpu", cuda=None),
            machine="aarch64",
        ),
        [
            (
                "cpu-torch-with-gpu",
                "broken",
                (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu130",),
            )
        ],
    ),
    "driver-470-for-cuda-12": (
        environment(nvml=gpus(("NVIDIA A10", (8, 6)), driver="470.82.01", cuda=11040)),
        [
            (
                "driver-too-old",
                "broken",
                (f"pip install --force-reinstall torch==2.4.1 --index-url {WHL}/cu118",),
            )
        ],
    ),
    "driver-560-for-cuda-12.9-minor-compat": (
        environment(
            nvml=gpus(("NVIDIA A10", (8, 6)), driver="560.35.03", cuda=12060),
            torch=torch_build("2.13.0+cu129", cuda="12.9", archs=CU129_ARCHS),
        ),
        [
            (
                "driver-minor-compat",
                "warning",
                (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu126",),
            )
        ],
    ),
    "only-ptx-for-an-rtx-5090": (
        environment(
            nvml=gpus(("NVIDIA GeForce RTX 5090", (12, 0))),
            torch=torch_build("2.13.0+cu126", archs="sm_80 sm_90 compute_90"),
        ),
        [
            (
                "gpu-arch-ptx-only",
                "warning",
                (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129",),
            )
        ],
    ),
    "capability-from-the-gpu-name": (
        environment(nvml=gpus(("NVIDIA GeForce RTX 5090", None))),
        [
            (
                "gpu-arch-unsupported",
                "broken",
                (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129",),
            )
        ],
    ),
    "vllm-pins-another-torch": (
        environment(
            torch=torch_build("2.5.1+cu124", cuda="12.4", archs=CU126_ARCHS),
            installed=stack(
                ("torch", "2.5.1+cu124"),
                ("vllm", "0.6.3"),
                broken=(
                    Broken(
                        distribution="vllm",
                        version="0.6.3",
                        requirement="torch==2.4.0",
                        required="torch",
                        installed="2.5.1+cu124",
                    ),
                ),
            ),
        ),
        [
            (
                "requirement-broken",
                "broken",
                (f'pip install "torch==2.4.0" --index-url {WHL}/cu124',),
            )
        ],
    ),
    "cuda-13-torch-on-driver-570-and-a-torch-pin": (
        environment(
            torch=torch_build("2.12.1+cu130", cuda="13.0", archs=CU129_ARCHS),
            installed=stack(
                ("torch", "2.12.1+cu130"),
                ("torchvision", "0.28.0"),
                broken=(
                    Broken(
                        distribution="torchvision",
                        version="0.28.0",
                        requirement="torch==2.13.0",
                        required="torch",
                        installed="2.12.1+cu130",
                    ),
                ),
            ),
        ),
        [
            (
                "driver-too-old",
                "broken",
                (
                    (
                        "pip install --force-reinstall torch==2.12.1 torchvision==0.28.0 "
                        f"--index-url {WHL}/cu126"
                    ),
                ),
            ),
            (
                "requirement-broken",
                "broken",
                (f'pip install "torch==2.13.0" --index-url {WHL}/cu130',),
            ),
        ],
    ),
    "transformers-misses-tokenizers": (
        environment(
            installed=stack(
                ("transformers", "4.50.0"),
                broken=(
                    Broken(
                        distribution="transformers",
                        version="4.50.0",
                        requirement="tokenizers<0.22,>=0.21",
                        required="tokenizers",
                        installed=None,
                    ),
                ),
            )
        ),
        [("requirement-broken", "broken", ('pip install "tokenizers<0.22,>=0.21"',))],
    ),
    "flash-attn-built-against-another-torch": (
        environment(
            extensions=(
                _ext(
                    "flash-attn",
                    "2.7.4.post1",
                    "ImportError: /site/flash_attn_2_cuda.so: undefined symbol: "
                    "_ZN3c104cuda9SetDeviceEa",
                    name="flash_attn_2_cuda",
                ),
            )
        ),
        [("extension-other-torch", "broken", (rebuild_command("flash-attn", "2.7.4.post1"),))],
    ),
    "xformers-pins-the-torch-it-was-built-for": (
        environment(
            installed=stack(
                ("torch", "2.13.0+cu126"),
                ("xformers", "0.0.28.post1"),
                broken=(
                    Broken(
                        distribution="xformers",
                        version="0.0.28.post1",
                        requirement="torch==2.5.0",
                        required="torch",
                        installed="2.13.0+cu126",
                    ),
                ),
            ),
            extensions=(
                _ext(
                    "xformers",
                    "0.0.28.post1",
                    "ImportError: undefined symbol: _ZN2at4_ops5zeros4callEv",
                ),
            ),
        ),
        [
            (
                "requirement-broken",
                "broken",
                ('pip install "torch==2.5.0"',),
            ),
            (
                "extension-other-torch",
                "broken",
                ('pip install "torch==2.5.0"',),
            ),
        ],
    ),
    "extension-built-for-cuda-11": (
        environment(
            extensions=(
                _ext(
                    "vllm",
                    "0.4.0",
                    "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory",
                ),
            )
        ),
        [("extension-other-cuda", "broken", (rebuild_command("vllm", "0.4.0"),))],
    ),
    "extension-crashes": (
        environment(
            extensions=(
                _ext("apex", "0.1", "loading it crashed the interpreter (SIGSEGV)", name="amp_C"),
            )
        ),
        [("extension-fails", "broken", ())],
    ),
    "small-shm-in-docker-with-a-gpu": (
        environment(
            nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0))), shm_bytes=64 << 20, container="docker"
        ),
        [("shm-small", "broken", ("docker run --shm-size=32g ...",))],
    ),
    "small-shm-in-docker-without-a-gpu": (
        environment(nvml=None, shm_bytes=64 << 20, container="docker", memory_bytes=8 * GIB),
        [("shm-small", "warning", ("docker run --shm-size=4g ...",)), ("no-gpu", "note", ())],
    ),
    "small-shm-outside-a-container-is-not-judged": (
        environment(nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0))), shm_bytes=64 << 20),
        [],
    ),
    "torch-does-not-import": (
        environment(
            nvml=None,
            torch=TorchBuild(
                installed=True,
                error="ImportError: libcudnn.so.9: cannot open shared object file",
            ),
        ),
        [("torch-import-fails", "broken", ()), ("no-gpu", "note", ())],
    ),
    "linux-driver-520-for-cuda-12.6": (
        environment(nvml=gpus(("NVIDIA A10", (8, 6)), driver="520.61.05", cuda=11080)),
        [
            (
                "driver-too-old",
                "broken",
                (f"pip install --force-reinstall torch==2.4.1 --index-url {WHL}/cu118",),
            )
        ],
    ),
    "windows-driver-526-of-branch-525-is-under-527.41": (
        environment(
            nvml=gpus(("NVIDIA GeForce RTX 3090", (8, 6)), driver="526.98", cuda=12000),
            torch=torch_build("2.5.1+cu124", cuda="12.4", archs=CU126_ARCHS),
            os=WINDOWS,
        ),
        [
            (
                "driver-too-old",
                "broken",
                (f"pip install --force-reinstall torch==2.4.1 --index-url {WHL}/cu118",),
            )
        ],
    ),
    "windows-driver-528-runs-cuda-12.4-with-a-limited-feature-set": (
        environment(
            nvml=gpus(("NVIDIA GeForce RTX 3090", (8, 6)), driver="528.02", cuda=12000),
            torch=torch_build("2.5.1+cu124", cuda="12.4", archs=CU126_ARCHS),
            os=WINDOWS,
        ),
        [("driver-minor-compat", "warning", ())],
    ),
    "wsl-reads-the-windows-driver": (
        environment(
            nvml=gpus(("NVIDIA GeForce RTX 3090", (8, 6)), driver="526.98", cuda=12000),
            torch=torch_build("2.5.1+cu124", cuda="12.4", archs=CU126_ARCHS),
            os="Linux-5.15.153.1-microsoft-standard-WSL2-x86_64-with-glibc2.35",
        ),
        [
            (
                "driver-too-old",
                "broken",
                (f"pip install --force-reinstall torch==2.4.1 --index-url {WHL}/cu118",),
            )
        ],
    ),
    "linux-driver-575-for-cuda-13": (
        environment(
            nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0)), driver="575.57.08", cuda=12090),
            torch=torch_build("2.13.0+cu130", cuda="13.0", archs=CU129_ARCHS),
        ),
        [
            (
                "driver-too-old",
                "broken",
                (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129",),
            )
        ],
    ),
    "linux-driver-580.65.06-runs-cuda-13": (
        environment(
            nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0)), driver="580.65.06", cuda=13000),
            torch=torch_build("2.13.0+cu130", cuda="13.0", archs=CU129_ARCHS),
        ),
        [],
    ),
    "bitsandbytes-cpu-library-under-torch-cu124": (
        environment(
            torch=torch_build("2.5.1+cu124", cuda="12.4", archs=CU126_ARCHS),
            installed=stack(("torch", "2.5.1+cu124"), ("bitsandbytes", "0.45.5")),
            extensions=(_bnb_cpu("libbitsandbytes_cpu.so"),),
        ),
        [("bitsandbytes-cpu-library", "broken", (f"{BNB_INSTALL}0.48.2",))],
    ),
    "bitsandbytes-cpu-library-on-windows-gets-a-windows-wheel": (
        environment(
            torch=torch_build("2.5.1+cu124", cuda="12.4", archs=CU126_ARCHS),
            installed=stack(("torch", "2.5.1+cu124"), ("bitsandbytes", "0.45.5")),
            extensions=(_bnb_cpu("libbitsandbytes_cpu.dll"),),
            os=WINDOWS,
        ),
        [("bitsandbytes-cpu-library", "broken", (f"{BNB_INSTALL}0.45.5",))],
    ),
    "bitsandbytes-cpu-library-under-cpu-torch-is-torch-s-verdict": (
        environment(
            torch=torch_build("2.13.0+cpu", cuda=None),
            installed=stack(("torch", "2.13.0+cpu"), ("bitsandbytes", "0.45.5")),
            extensions=(_bnb_cpu("libbitsandbytes_cpu.so"),),
        ),
        [
            (
                "cpu-torch-with-gpu",
                "broken",
                (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu126",),
            )
        ],
    ),
    "bitsandbytes-cpu-library-without-gpu-or-cuda-is-right": (
        environment(
            nvml=None,
            torch=torch_build("2.13.0+cpu", cuda=None),
            installed=stack(("torch", "2.13.0+cpu"), ("bitsandbytes", "0.45.5")),
            extensions=(_bnb_cpu("libbitsandbytes_cpu.so"),),
        ),
        [("no-gpu", "note", ()), ("cpu-torch", "note", ())],
    ),
    "the-driver-shows-no-gpu": (
        environment(nvml=gpus(), variables=(("CUDA_VISIBLE_DEVICES", ""),)),
        [("no-gpu", "note", ())],
    ),
}


@pytest.mark.parametrize(("env", "expected"), SITUATIONS.values(), ids=SITUATIONS.keys())
def test_situation(env, expected):
    """The verdicts of each situation, their severities and the commands computed for it."""
    checkup = Checkup(environment=env, verdicts=judge(env))
    assert expected == [(v.code, v.severity, v.commands) for v in checkup.verdicts]


def test_at_least_fifteen_situations_have_a_verdict():
    """The brief asks for 15 situations with a verdict; the commands of most are checked."""
    judged = [k for k, (_, expected) in SITUATIONS.items() if expected]
    assert len(judged) >= 15, judged


def test_an_unsupported_gpu_cites_the_table_rows():
    """The build chosen for an RTX 5090 cites torch 2.13.0's wheel, where its row was read."""
    env = SITUATIONS["rtx-5090-on-a-cu126-build"][0]
    (verdict,) = judge(env)
    assert (
        "torch-2.13.0 wheel, torch/cuda/__init__.py:332 (PYTORCH_RELEASES_CODE_CC)"
        == verdict.sources[0]
    )


def test_the_driver_verdict_names_the_driver_needed():
    """CUDA 12 needs 525.60.13 on Linux (NVIDIA's minimum under minor version compatibility);
    the newest torch build listed for a CUDA this driver runs is the other way (2.4.1 for 11.8)."""
    env = SITUATIONS["driver-470-for-cuda-12"][0]
    (verdict,) = judge(env)
    assert (
        "Upgrade the NVIDIA driver to one >= 525.60.13 (Linux); or install torch 2.4.1 built for"
        " CUDA 11.8, which it runs under minor version compatibility." == verdict.fix
    )


def test_the_driver_verdict_says_the_build_the_minimum_and_the_driver():
    """torch's CUDA (and where it was read), the minimum on this OS, the driver NVML gives."""
    env = SITUATIONS["windows-driver-526-of-branch-525-is-under-527.41"][0]
    (verdict,) = judge(env)
    said = (
        "torch 2.5.1+cu124 is built for CUDA 12.4 (test)",
        "CUDA 12.x needs an NVIDIA driver >= 527.41 (Windows)",
        "the driver is 526.98 (libnvidia-ml.so.1), which runs CUDA 12.0 at most",
    )
    assert [True, True, True] == [part in verdict.why for part in said]


def test_a_driver_of_the_right_branch_under_the_exact_minimum_is_too_old_on_linux():
    """525.53 is of branch 525, but Linux needs 525.60.13: the exact version is compared."""
    env = environment(
        nvml=gpus(("NVIDIA A10", (8, 6)), driver="525.53", cuda=12000),
        torch=torch_build("2.5.1+cu124", cuda="12.4", archs=CU126_ARCHS),
    )
    assert ["driver-too-old"] == [v.code for v in judge(env)]


def test_cuda_13_on_windows_needs_the_branch_the_guide_gives():
    """No NVIDIA page read gives CUDA 13's Windows minimum apart: its branch, 580, is said."""
    env = environment(
        nvml=gpus(("NVIDIA GeForce RTX 5090", (12, 0)), driver="576.88", cuda=12090),
        torch=torch_build("2.13.0+cu130", cuda="13.0", archs=CU129_ARCHS),
        os=WINDOWS,
    )
    (verdict,) = judge(env)
    assert "Upgrade the NVIDIA driver to one of branch 580 or newer (Windows)" in verdict.fix


def test_the_build_offered_runs_on_the_driver_under_its_own_minimum():
    """Every build the driver verdict offers is one whose CUDA the driver runs on that OS."""
    from errkb.advisors.environment._tables import tables
    from errkb.advisors.environment.verdicts import best_build, driver_runs

    for key in ("linux-driver-520-for-cuda-12.6", "windows-driver-526-of-branch-525-is-under-527.41",
                "linux-driver-575-for-cuda-13"):  # fmt: skip
        env = SITUATIONS[key][0]
        build = best_build(tables(), env, (8, 6), None)
        assert (key, True) == (key, driver_runs(tables(), build.cuda, env))


def test_nothing_broken_and_something_broken():
    """Checkup.broken is what sets errkb doctor's exit status."""
    fine = SITUATIONS["h100-on-a-cu126-build-is-fine"][0]
    bad = SITUATIONS["rtx-5090-on-a-cu126-build"][0]
    assert (False, True) == (
        Checkup(environment=fine, verdicts=judge(fine)).broken,
        Checkup(environment=bad, verdicts=judge(bad)).broken,
    )
