"""A pasted environment judged: errkb doctor --from-paste, and a pasted error beside it.

The environments are the real outputs of tests/data/environments (README.md there says where
each comes from). A paste with an error puts a real message of the error before them: the
wordings are torch's and the loader's, as the records cite them. Two outputs of different
reports are pasted together where a situation needs both (an `accelerate env` and an
`nvidia-smi`); each part is real, the pairing is the test's.
"""

from __future__ import annotations

import pytest
from helpers import DATA

from errkb.advisors.environment._pasted import BLACKWELL_SOURCE, judge_pasted
from errkb.advisors.environment._tables import tables
from errkb.diagnosis import explain
from errkb.doctor import examine_paste
from errkb.options import Options
from errkb.probes.pasted_env import read_pasted

ENVS = DATA / "environments"
WHL = "https://download.pytorch.org/whl"

NO_KERNEL = (
    "Traceback (most recent call last):\n"
    '  File "/home/u/train.py", line 3, in <module>\n'
    '    x = torch.zeros(1, device="cuda")\n'
    "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n\n"
)
NOT_COMPILED = (
    "Traceback (most recent call last):\n"
    '  File "/app/t.py", line 3, in <module>\n'
    "    x = torch.zeros(1).cuda()\n"
    "AssertionError: Torch not compiled with CUDA enabled\n\n"
)
VLLM_C_SYMBOL = (
    "Traceback (most recent call last):\n"
    '  File "/app/serve.py", line 2, in <module>\n'
    "    import vllm._C\n"
    "ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: "
    "_ZN3c104cuda9SetDeviceEi\n\n"
)


def _env(*names: str) -> str:
    return "\n".join((ENVS / n).read_text(encoding="utf-8") for n in names)


def _verdicts(*names: str) -> list[tuple[str, tuple[str, ...]]]:
    checkup = examine_paste(_env(*names))
    assert checkup is not None
    return [(v.code, v.commands) for v in checkup.verdicts]


def _explained(text: str):
    diagnosis = explain(text, options=Options(probes=False, timeout=60.0))
    assert diagnosis is not None
    return diagnosis.to_dict()


def _facts(data: dict, source: str) -> dict[str, object]:
    return {f["name"]: f["value"] for f in data["facts"] if f["source"] == source}


# -- errkb doctor --from-paste -------------------------------------------------------------


def test_rtx_5090_and_torchs_warning_get_the_build_for_sm_120_that_driver_570_runs():
    """pytorch#150733: the cu126 build lacks sm_120; driver 570 is under CUDA 13's 580."""
    expected = [
        (
            "gpu-arch-unsupported",
            (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129",),
        )
    ]
    assert expected == _verdicts("pytorch-150733-collect-env-rtx5090d.txt")


def test_cpu_torch_pasted_with_a_gpus_nvidia_smi_is_broken_with_the_cuda_build():
    """accelerate env (torch 2.13.0+cpu) beside nvidia-smi (RTX 4090, driver 550: CUDA 12.4)."""
    expected = [
        (
            "cpu-torch-with-gpu",
            (f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu126",),
        )
    ]
    actual = _verdicts("local-accelerate-env.txt", "rlinf-255-nvidia-smi-2x4090.txt")
    assert expected == actual


def test_this_machines_collect_env_says_cpu_torch_and_no_gpu_in_the_paste():
    """Our own collect_env: notes only, and none speaks of this machine's NVML or torch."""
    expected = [("cpu-torch", ()), ("paste-no-gpu", ())]
    assert expected == _verdicts("local-collect-env.txt")


def test_a_paste_without_torchs_build_says_so_instead_of_an_import_failure():
    """nvidia-smi alone: torch's checks are skipped, never 'torch does not import'."""
    assert [("paste-no-torch-build", ())] == _verdicts("rlinf-255-nvidia-smi-2x4090.txt")


def test_a_build_outside_the_tables_says_its_architectures_are_unknown():
    """vllm#41209: torch 2.11.0+cu129 is not a row of the tables: no verdict is guessed."""
    assert [("paste-archs-unknown", ())] == _verdicts("vllm-41209-collect-env-4090.txt")


def test_the_capability_source_is_the_paste_never_nvml():
    """The verdict says where sm_120 came from: torch's warning in the paste."""
    pasted = read_pasted(_env("pytorch-150733-collect-env-rtx5090d.txt"))
    assert pasted is not None
    (verdict,) = judge_pasted(pasted, tables())
    assert "compute capability 12.0 (torch's warning in the paste)" in verdict.why
    assert "NVML" not in verdict.why


def test_text_without_a_report_is_no_checkup():
    """A traceback alone holds no environment: the doctor has nothing to judge."""
    assert examine_paste(NO_KERNEL) is None


def test_the_json_form_lists_the_tools_and_each_facts_line():
    """--json of a paste: 'pasted' with the tools, every fact with its line, the notes."""
    checkup = examine_paste(_env("accelerate-3446-env-a6000.txt"))
    assert checkup is not None
    pasted = checkup.to_dict()["pasted"]
    assert ["accelerate env"] == pasted["tools"]
    gpu = {"name": "gpu 0", "value": "NVIDIA RTX A6000", "tool": "accelerate env", "line": 15}
    assert gpu in pasted["facts"]  # line 15 of the file: "- GPU type: NVIDIA RTX A6000"


# -- a pasted error beside report tools' output ----------------------------------------------


def test_no_kernel_image_beside_a_blackwell_gpu_and_a_cu121_torch_gets_the_sm_120_build():
    """The issue's case: RTX 5090 + torch 2.5.1+cu121 + 'no kernel image' -> a build for sm_120.

    vllm#13497's collect_env names an RTX 4090; the GPU line is the RTX 5090 of vllm#29864.
    """
    env = _env("vllm-13497-collect-env-4090.txt").replace(
        "GPU 0: NVIDIA GeForce RTX 4090", "GPU 0: NVIDIA GeForce RTX 5090"
    )
    data = _explained(NO_KERNEL + env)
    (match,) = [m for m in data["matches"] if m["id"] == "torch-cuda-no-kernel-image"]
    command = f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129"
    assert command == match["solutions"][0]["settings"]["command"]
    assert BLACKWELL_SOURCE in [f["value"] for f in data["facts"] if f["name"] == "table_row"]


def test_no_kernel_image_on_an_ada_gpu_keeps_the_records_fix():
    """RTX 4090 + cu121: torch has sm_86 code for it, so the error may be an extension's."""
    data = _explained(NO_KERNEL + _env("vllm-13497-collect-env-4090.txt"))
    match = next(m for m in data["matches"] if m["id"] == "torch-cuda-no-kernel-image")
    assert "command" not in match["solutions"][0].get("settings", {})


def test_a_pasted_errors_facts_are_the_pastes_and_none_is_this_machines():
    """The GPU, driver and torch come from the paste; nothing says 'installed' (this Python)."""
    data = _explained(
        NOT_COMPILED + _env("local-accelerate-env.txt", "rlinf-255-nvidia-smi-2x4090.txt")
    )
    pasted = _facts(data, "paste")
    assert "NVIDIA GeForce RTX 4090 (sm_89)" == pasted["gpu"]
    assert "550.163.01" == pasted["driver"]
    assert "2.13.0+cpu (no CUDA)" == pasted["torch"]
    assert {} == _facts(data, "installed")
    assert any("the paste (accelerate env, nvidia-smi) describes" in n for n in data["notes"])


def test_torch_not_compiled_with_cuda_beside_a_gpu_gets_the_cuda_build_for_its_driver():
    """Driver 550 runs CUDA 12.4 at most: the oldest CUDA 12 build of 2.13.0 (cu126)."""
    data = _explained(
        NOT_COMPILED + _env("local-accelerate-env.txt", "rlinf-255-nvidia-smi-2x4090.txt")
    )
    settings = data["solutions"][0]["settings"]
    assert (
        f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu126"
        == settings["command"]
    )


def test_an_extensions_undefined_symbol_is_rebuilt_at_the_release_the_paste_lists():
    """vllm#21028's pip list says vllm 0.9.2: the file the loader named belongs to it."""
    data = _explained(VLLM_C_SYMBOL + _env("vllm-21028-collect-env-tail.txt"))
    expected = (
        "pip install --no-build-isolation --no-deps --force-reinstall --no-cache-dir "
        "--no-binary vllm vllm==0.9.2"
    )
    assert expected == data["solutions"][0]["settings"]["command"]


def test_torchs_warning_and_collect_env_together_give_the_doctors_command():
    """pytorch#150733 as pasted (the warning inside collect_env): the doctor's build, cu129."""
    data = _explained(_env("pytorch-150733-collect-env-rtx5090d.txt"))
    command = f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129"
    assert command == data["solutions"][0]["settings"]["command"]


@pytest.mark.parametrize(
    "text",
    [NO_KERNEL, NOT_COMPILED],
    ids=["no-kernel-image", "not-compiled"],
)
def test_an_error_without_a_report_is_judged_by_its_message_as_before(text):
    """No report tool's output: no fact from a paste, the message-only path's note."""
    data = _explained(text)
    assert {} == _facts(data, "paste")
    assert not any("the paste (" in n for n in data["notes"])


# -- pip check, ds_report, python -m bitsandbytes in the paste -------------------------------


def test_pasted_pip_check_gets_the_installed_set_verdicts_with_their_commands():
    """Our own pip check: the doctor's requirement-broken verdicts, one per distribution."""
    assert [
        ("requirement-broken", ('pip install "tokenizers"',)),
        ("requirement-broken", ('pip install "torch==2.4.0"',)),
    ] == [v for v in _verdicts("local-pip-check.txt") if v[0] == "requirement-broken"]


def test_pasted_pip_check_keeps_the_pasted_torch_s_cuda_build():
    """Beside collect_env's torch 2.5.1+cu124, the torch pin comes from the cu124 index, as the
    doctor does for the live machine; the verdict says pip check in the paste said it."""
    checkup = examine_paste(
        "PyTorch version: 2.5.1+cu124\n"
        "vllm 0.6.3 has requirement torch==2.4.0, but you have torch 2.5.1+cu124.\n"
    )
    assert checkup is not None
    (verdict,) = [v for v in checkup.verdicts if v.code == "requirement-broken"]
    assert (
        ('pip install "torch==2.4.0" --index-url https://download.pytorch.org/whl/cu124',),
        True,
    ) == (
        verdict.commands,
        verdict.why.startswith("pip check (the paste (collect_env, pip check))"),
    )


def test_pasted_bitsandbytes_library_that_did_not_load_is_a_broken_extension():
    """bitsandbytes#1559: the doctor's extension verdict for the library the paste names."""
    assert ("extension-fails", ()) in _verdicts("bitsandbytes-1559-native-library-missing.txt")


def test_an_extension_error_beside_pasted_pip_check_gets_the_torch_it_pins():
    """vLLM's _C missing a c10 symbol, and pip check saying vllm 0.6.3 pins torch 2.4.0 while
    2.5.1 is installed: the torch vLLM was built for is the fix, not a rebuild."""
    data = _explained(VLLM_C_SYMBOL + _env("local-pip-check.txt"))
    assert 'pip install "torch==2.4.0"' == data["solutions"][0]["settings"]["command"]
