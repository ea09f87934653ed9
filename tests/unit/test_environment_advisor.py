"""errkb.advisors.environment: the environment's errors, recognised, with the doctor's command.

Every message is real: raised here by the real part where one exists on this machine (torch's
CPU build, CPython and the system loader importing an extension built in the test), or copied
from a report (the record's examples cite them). A live error is judged with an injected
environment (tests/environments.py, the readings the doctor's probes return), and the command
must be the one the doctor computes for that environment; a pasted one with what it says only.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import sysconfig

import pytest
from environments import compile_library, environment, gpus, stack, torch_build, write_dist
from helpers import DATA

import errkb
from errkb.advisors.environment.verdicts import judge, rebuild_command
from errkb.diagnosis import diagnose, explain
from errkb.options import Options
from errkb.probes import Measurements
from errkb.probes.extensions import Extension
from errkb.probes.stack import Broken
from errkb.registry import default_registry

WHL = "https://download.pytorch.org/whl"
RTX_5090 = gpus(("NVIDIA GeForce RTX 5090", (12, 0)), driver="570.86.15", cuda=12080)
H100 = gpus(("NVIDIA H100 80GB HBM3", (9, 0)), driver="570.86.15", cuda=12080)

#: Real warnings and errors from reports (the records' examples name the issues).
CAPABILITY = (
    "C:\\Hi3DGen_1Click_v04_Triton\\code\\venv\\lib\\site-packages\\torch\\cuda\\__init__.py:230: "
    "UserWarning:\nNVIDIA GeForce RTX 5080 Laptop GPU with CUDA capability sm_120 is not "
    "compatible with the current PyTorch installation.\nThe current PyTorch install supports "
    "CUDA capabilities sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90.\nIf you want to use the "
    "NVIDIA GeForce RTX 5080 Laptop GPU GPU with PyTorch, please check the instructions at "
    "https://pytorch.org/get-started/locally/"
)
TOO_OLD = "RuntimeError: The NVIDIA driver on your system is too old (found version 12080)"
NO_KERNEL = (
    "CUDA error: no kernel image is available for execution on the device\nCUDA kernel errors "
    "might be asynchronously reported at some other API call,so the stacktrace below might be "
    "incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1."
)
INSUFFICIENT = "CUDA error: CUDA driver version is insufficient for CUDA runtime version"


def _corpus(entry: str) -> str:
    for line in (DATA / "reports" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        report = json.loads(line)
        if report["id"] == entry:
            return str(report["errorLine"])
    raise LookupError(entry)


def _options(env: object) -> Options:
    return Options(measurements=Measurements(readings={"environment": env}))


def _raised(exc_type: type[BaseException], message: str, env: object) -> errkb.Diagnosis:
    """The diagnosis of ``message`` raised here, live, on the injected environment ``env``."""
    try:
        raise exc_type(message)
    except exc_type as exc:
        found = diagnose(exc, options=_options(env))
    assert found is not None
    return found


def _command(diagnosis: errkb.Diagnosis | None) -> object:
    assert diagnosis is not None
    return diagnosis.findings[0].solutions[0].settings.get("command")


def _doctor(env: object, code: str) -> str:
    """The command the doctor gives for ``env``'s verdict ``code``."""
    verdicts = [v for v in judge(env) if v.code == code]  # type: ignore[arg-type]
    assert verdicts, code
    return " && ".join(verdicts[0].commands)


# -- the records, on real messages ---------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "record", "captures"),
    [
        (
            CAPABILITY,
            "torch-cuda-capability-not-compatible",
            {"gpu": "NVIDIA GeForce RTX 5080 Laptop GPU", "sm": 120,
             "archs": "sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90"},
        ),
        (TOO_OLD, "torch-nvidia-driver-too-old", {"driver_cuda": 12080}),
        (INSUFFICIENT, "torch-nvidia-driver-too-old", {}),
        (
            (
                "ImportError: /home/pc/data/vllm/vllm/vllm/_C.abi3.so: undefined symbol: "
                "_ZN5torch3jit17parseSchemaOrNameERKSsb"
            ),
            "vllm-extension-undefined-torch-symbol",
            {"module": "_C.abi3.so", "symbol": "_ZN5torch3jit17parseSchemaOrNameERKSsb"},
        ),
        (
            (
                "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or "
                "directory"
            ),
            "vllm-cuda-runtime-library-not-found",
            {"library": "libcudart.so.11", "cuda_major": 11},
        ),
        (_corpus("flash-attn-10"), "flash-attn-cuda-extension-undefined-symbol", {}),
        # torchaudio 0.1-0.2's top-level extension, in glibc's wording and in dyld's (macOS).
        (_corpus("torchaudio-6"), "torchaudio-extension-built-for-other-torch",
         {"symbol": "_ZN2at19UndefinedTensorImpl10_singletonE"}),
        (_corpus("torchaudio-3"), "torchaudio-extension-built-for-other-torch",
         {"symbol": "__ZN3c1011CPUTensorIdEv"}),
    ],
)  # fmt: skip
def test_each_record_matches_a_real_message(message, record, captures):
    """The real message finds its record first, with the captures the advisor reads."""
    top = errkb.lookup(message)[0]
    assert (record, captures) == (
        top.record.id,
        {k: v for k, v in top.captures.items() if k in captures},
    )


def test_the_environment_advisor_is_named_by_every_record_of_the_family():
    """Each record of the family names the advisor, so each gets the doctor's command."""
    ids = [
        "torch-cuda-capability-not-compatible", "torch-cuda-no-kernel-image",
        "torch-nvidia-driver-too-old",
        "torch-torch-not-compiled-with-cuda", "vllm-extension-undefined-torch-symbol",
        "vllm-cuda-runtime-library-not-found", "flash-attn-cuda-extension-undefined-symbol",
    ]  # fmt: skip
    registry = default_registry()
    assert dict.fromkeys(ids, ("environment",)) == {i: registry.get(i).advisors for i in ids}


# -- pasted: what the message says, never this machine --------------------------------------


def test_pasted_capability_warning_gets_the_build_for_that_gpu():
    """The warning's GPU and torch's architectures, judged with the tables: torch for sm_120."""
    found = explain(CAPABILITY, options=_options(environment(nvml=H100)))
    expected = _doctor(
        environment(nvml=gpus(("NVIDIA GeForce RTX 5080 Laptop GPU", (12, 0)), driver="",
                              cuda=0),
                    torch=torch_build(version="", archs="sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90")),
        "gpu-arch-unsupported",
    )  # fmt: skip
    assert (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu132", expected) == (
        _command(found),
        expected,
    )


def test_a_pasted_message_never_uses_this_machine_s_facts():
    """An injected machine (an H100 on torch for CUDA 12.6) is ignored for a pasted message."""
    found = explain(TOO_OLD, options=_options(environment(nvml=H100)))
    assert found is not None
    finding = found.findings[0]
    assert (
        f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu126",
        [],
        True,
    ) == (
        finding.solutions[0].settings["command"],
        [f.name for f in finding.facts if f.source == "probe"],
        any("never by this machine's facts" in n for n in found.notes),
    )


def test_pasted_message_without_figures_keeps_the_record_s_fix():
    """'no kernel image' pasted says nothing of the GPU: no command, the record's Fix stays."""
    found = explain(NO_KERNEL, options=_options(environment(nvml=RTX_5090)))
    assert found is not None
    assert found.findings[0].solutions[0].text.startswith("Compare torch.cuda.get_device_cap")


# -- live: the injected machine, the doctor's command ---------------------------------------


def test_no_kernel_image_raised_on_an_rtx_5090_with_a_cu126_build():
    """sm_120 is not in the build: the doctor's torch for this GPU and driver (CUDA 12.9)."""
    env = environment(nvml=RTX_5090)
    found = _raised(RuntimeError, NO_KERNEL, env)
    assert (
        f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129",
        _doctor(env, "gpu-arch-unsupported"),
    ) == (_command(found), _command(found))


def test_capability_warning_raised_uses_nvml_not_the_message():
    """Live, NVML's GPU is judged: an H100 the build carries code for gets no command."""
    found = _raised(UserWarning, CAPABILITY, environment(nvml=H100))
    assert found.findings[0].record.id == "torch-cuda-capability-not-compatible"
    assert "command" not in found.findings[0].solutions[0].settings


def test_driver_too_old_raised_with_a_cuda_13_build():
    """A driver of branch 535 (CUDA 12.2) under torch for CUDA 13.0: the doctor's verdict."""
    env = environment(
        nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0)), driver="535.183.01", cuda=12020),
        torch=torch_build("2.13.0+cu130", cuda="13.0", archs="sm_75 sm_80 sm_86 sm_90 sm_100"),
    )
    found = _raised(RuntimeError, TOO_OLD.removeprefix("RuntimeError: "), env)
    finding = found.findings[0]
    assert (_doctor(env, "driver-too-old"), "driver-too-old") == (
        _command(found),
        next(f.note for f in finding.facts if f.name == "verdict").split(":")[0],
    )


def test_insufficient_driver_raised_gets_the_same_verdict():
    """The CUDA runtime's wording of the same condition gets the same command."""
    env = environment(
        nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0)), driver="535.183.01", cuda=12020),
        torch=torch_build("2.13.0+cu130", cuda="13.0", archs="sm_75 sm_80 sm_86 sm_90 sm_100"),
    )
    assert _doctor(env, "driver-too-old") == _command(_raised(RuntimeError, INSUFFICIENT, env))


def test_torch_not_compiled_with_cuda_raised_by_real_torch():
    """Real torch (the CPU build here) raises it; on an injected H100 the CUDA build is the fix."""
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None:
        pytest.skip("this torch is a CUDA build")
    env = environment(nvml=H100, torch=torch_build("2.13.0+cpu", cuda=None))
    try:
        torch.zeros(1, device="cuda")
    except AssertionError as exc:
        found = diagnose(exc, options=_options(env))
    assert (
        "torch-torch-not-compiled-with-cuda",
        _doctor(env, "cpu-torch-with-gpu"),
    ) == (found.findings[0].record.id, _command(found))


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site-packages folder on sys.path, forgotten afterwards."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in [n for n in sys.modules if n.startswith(("flash_attn", "fakevllm"))]:
        del sys.modules[name]
    importlib.invalidate_caches()


def _extension(site, tmp_path, name: str, source: str, dist: str, version: str, **kw):
    binary = compile_library(source, tmp_path / "build" / f"{name}.so")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    write_dist(site, dist, version, files={f"{name}{suffix}": binary}, **kw)


def test_undefined_torch_symbol_raised_by_the_loader(site, tmp_path):
    """flash-attn's binary built here against a torch symbol that is not there: rebuild it."""
    _extension(
        site, tmp_path, "flash_attn_2_cuda",
        "extern void _ZN3c104cuda9SetDeviceEa(signed char);\n"
        "void *PyInit_flash_attn_2_cuda(void) { _ZN3c104cuda9SetDeviceEa(0); return 0; }\n",
        "flash-attn", "2.7.4.post1",
    )  # fmt: skip
    (site / "flash_attn").mkdir()  # flash_attn_interface.py imports it so, at module level
    (site / "flash_attn" / "__init__.py").write_text("import flash_attn_2_cuda\n")
    env = environment(installed=stack(("torch", "2.13.0+cu126"), ("flash-attn", "2.7.4.post1")))
    with pytest.raises(ImportError) as caught:
        importlib.import_module("flash_attn")
    found = diagnose(caught.value, options=_options(env))
    doctor = environment(
        installed=env.stack,
        extensions=(Extension(distribution="flash-attn", version="2.7.4.post1", kind="module",
                              name="flash_attn_2_cuda", path="", error=str(caught.value)),),
    )  # fmt: skip
    assert (
        "flash-attn-cuda-extension-undefined-symbol",
        rebuild_command("flash-attn", "2.7.4.post1"),
        _doctor(doctor, "extension-other-torch"),
    ) == (found.findings[0].record.id, _command(found), _command(found))


def test_undefined_torch_symbol_of_a_package_that_pins_another_torch(site, tmp_path):
    """The package pins torch 2.4.0 and 2.13.0 is installed: install the torch it was built for."""
    (site / "fakevllm").mkdir()  # vllm/platforms/cuda.py imports vllm._C so, at module level
    (site / "fakevllm" / "__init__.py").write_text("import fakevllm._C\n")
    _extension(
        site, tmp_path, "fakevllm/_C",
        "extern void _ZN3c104cuda9SetDeviceEi(int);\n"
        "void *PyInit__C(void) { _ZN3c104cuda9SetDeviceEi(0); return 0; }\n",
        "fakevllm", "0.6.3", requires=("torch==2.4.0",),
    )  # fmt: skip
    broken = Broken(distribution="fakevllm", version="0.6.3", requirement="torch==2.4.0",
                    required="torch", installed="2.13.0+cu126")  # fmt: skip
    env = environment(
        installed=stack(("torch", "2.13.0+cu126"), ("fakevllm", "0.6.3"), broken=(broken,))
    )
    with pytest.raises(ImportError) as caught:
        importlib.import_module("fakevllm")
    found = diagnose(caught.value, options=_options(env))
    doctor = environment(
        installed=env.stack,
        extensions=(Extension(distribution="fakevllm", version="0.6.3", kind="module", name="_C",
                              path="", error=str(caught.value)),),
    )  # fmt: skip
    assert (
        "vllm-extension-undefined-torch-symbol",
        'pip install "torch==2.4.0"',
        _doctor(doctor, "extension-other-torch"),
    ) == (found.findings[0].record.id, _command(found), _command(found))


def test_libcudart_of_another_cuda_raised_by_the_loader(site, tmp_path):
    """An extension linked against a libcudart.so.12 that is not there, torch for CUDA 13."""
    cc = pytest.importorskip("shutil").which("cc") or "gcc"
    build = tmp_path / "build"
    build.mkdir()
    (build / "cudart.c").write_text("int cudaRuntimeGetVersion(int *v) { *v = 12080; return 0; }\n")
    (build / "ext.c").write_text(
        "extern int cudaRuntimeGetVersion(int *);\n"
        "void *PyInit__C(void) { int v; cudaRuntimeGetVersion(&v); return 0; }\n"
    )
    lib = build / "libcudart.so.12"
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", str(lib),
                    str(build / "cudart.c")], check=True, capture_output=True)  # fmt: skip
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(build / "_C.so"), str(build / "ext.c"),
                    str(lib)], check=True, capture_output=True)  # fmt: skip
    lib.unlink()
    package = site / "fakevllm"
    package.mkdir()
    (package / "__init__.py").write_text("from fakevllm import _C\n", encoding="utf-8")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    write_dist(site, "fakevllm", "0.6.3", files={f"fakevllm/_C{suffix}": build / "_C.so"})
    env = environment(
        torch=torch_build("2.13.0+cu130", cuda="13.0", archs="sm_75 sm_80 sm_86 sm_90 sm_100"),
        installed=stack(("torch", "2.13.0+cu130"), ("fakevllm", "0.6.3")),
    )
    with pytest.raises(ImportError) as caught:
        importlib.import_module("fakevllm")
    found = diagnose(caught.value, options=_options(env))
    assert (
        "libcudart.so.12: cannot open shared object file: No such file or directory",
        "vllm-cuda-runtime-library-not-found",
        rebuild_command("fakevllm", "0.6.3"),
    ) == (str(caught.value), found.findings[0].record.id, _command(found))


def test_probes_off_judges_only_the_message():
    """With probes off, a live error is judged by its message, as a pasted one is."""
    try:
        raise RuntimeError(TOO_OLD.removeprefix("RuntimeError: "))
    except RuntimeError as exc:
        found = diagnose(exc, options=Options(probes=False))
    assert found is not None
    assert (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu126", True) == (
        _command(found),
        any("probes are off" in n for n in found.notes),
    )


# -- the driver too old for torch's CUDA, in its reported wordings --------------------------

#: lllyasviel/Fooocus#1313: torch's message, beside the head of nvidia-smi's table (driver 470.86,
#: CUDA 11.4) on Ubuntu.
FOOOCUS_1313 = """RuntimeError: The NVIDIA driver on your system is too old (found version 11040). \
Please update your GPU driver by downloading and installing a new version from the URL: \
http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a \
PyTorch version that has been compiled with your version of the CUDA driver.

Ubuntu 21.04
Nvidia GeForce RTX 3050 laptop GPU

-nvidia-smi

+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.86       Driver Version: 470.86       CUDA Version: 11.4
|-------------------------------+----------------------+----------------------+
"""
#: nagadomi/nunif#702: the CUDA runtime's wording, under a CUDA 13 torch.
NUNIF_702 = "CUDA error: CUDA driver version is insufficient for CUDA runtime version"
#: microsoft/human-pose-estimation.pytorch#23: the same condition in torch's older THC wording.
POSE_23 = (
    "cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at "
    "/pytorch/aten/src/THC/THCGeneral.cpp:74"
)


def test_pasted_driver_too_old_beside_nvidia_smi_gets_a_build_that_driver_runs():
    """Fooocus#1313: driver 470.86 runs CUDA 11.x (>= 450.80.02): torch 2.4.1's cu118 build."""
    found = explain(FOOOCUS_1313)
    finding = found.findings[0]
    facts = {(f.source, f.name): f.value for f in finding.facts}
    assert (
        "torch-nvidia-driver-too-old",
        f"pip install --force-reinstall torch==2.4.1 --index-url {WHL}/cu118",
        "470.86",
    ) == (finding.record.id, _command(found), facts[("paste", "driver")])
    assert ">= 525.60.13 (Linux) / >= 527.41 (Windows)" in finding.solutions[0].text


@pytest.mark.parametrize("message", [NUNIF_702, POSE_23])
def test_insufficient_driver_raised_on_a_linux_driver_575_under_cuda_13(message):
    """A CUDA 13 torch on driver 575 (CUDA 12.9): under 580.65.06, so the cu129 build it runs in
    full is the command, the doctor's; the verdict names the build, the minimum and the driver."""
    env = environment(
        nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0)), driver="575.57.08", cuda=12090),
        torch=torch_build("2.13.0+cu130", cuda="13.0", archs="sm_75 sm_80 sm_86 sm_90 sm_100"),
    )
    found = _raised(RuntimeError, message, env)
    why = next(f.note for f in found.findings[0].facts if f.name == "verdict")
    command = f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129"
    assert (command, command) == (_command(found), _doctor(env, "driver-too-old"))
    said = ("built for CUDA 13.0", ">= 580.65.06 (Linux)", "the driver is 575.57.08")
    assert [True, True, True] == [part in why for part in said]


def test_driver_too_old_raised_on_windows_names_the_windows_minimum():
    """Driver 526.98 on Windows is of branch 525, under CUDA 12's 527.41 there."""
    env = environment(
        nvml=gpus(("NVIDIA GeForce RTX 3090", (8, 6)), driver="526.98", cuda=12000),
        torch=torch_build("2.5.1+cu124", cuda="12.4", archs="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86"),
        os="Windows-10-10.0.19045-SP0",
    )
    found = _raised(RuntimeError, TOO_OLD.removeprefix("RuntimeError: "), env)
    assert (
        f"pip install --force-reinstall torch==2.4.1 --index-url {WHL}/cu118",
        True,
    ) == (_command(found), ">= 527.41 (Windows)" in found.findings[0].solutions[0].text)


def test_the_vllm_record_leaves_another_distributions_extension_alone():
    """glibc words every extension's missing symbol alike: a file outside vllm is not vLLM's."""
    ids = [m.record.id for m in errkb.lookup(_corpus("torchaudio-6").strip())]
    assert ("torchaudio-extension-built-for-other-torch", False) == (
        ids[0],
        "vllm-extension-undefined-torch-symbol" in ids,
    )
