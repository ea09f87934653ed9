"""errkb.probes.pasted_env: report tools' output read back as the environment it describes.

The fixtures are real: this virtual environment's own collect_env, accelerate env and
transformers env, and outputs pasted into public issues (tests/data/environments/README.md
gives each one's URL). Each expected value is the one the tool printed in the fixture.
"""

from __future__ import annotations

import attrs
import pytest
from helpers import DATA
from hypothesis import given
from hypothesis import strategies as st

from errkb.probes.pasted_env import read_pasted

ENVS = DATA / "environments"


def _read(name: str):
    pasted = read_pasted((ENVS / name).read_text(encoding="utf-8"))
    assert pasted is not None
    return pasted


def _unplaced(env):
    """``env`` without the line numbers its distributions were read from."""
    dists = tuple(attrs.evolve(d, folder="") for d in env.stack.distributions)
    return attrs.evolve(env, stack=attrs.evolve(env.stack, distributions=dists))


def _versions(pasted) -> dict[str, str]:
    return {d.name: d.version for d in pasted.environment.stack.distributions}


def test_this_machines_collect_env_is_a_cpu_torch_without_gpu():
    """Our own `python -m torch.utils.collect_env`: torch 2.13.0+cpu, no GPU, glibc 2.36."""
    env = _read("local-collect-env.txt").environment
    assert ("2.13.0+cpu", None, True) == (env.torch.version, env.torch.cuda, env.torch.cpu_only)
    assert (None, "the paste names no GPU and no driver") == (env.nvml, env.nvml_error)
    assert ("x86_64", "2.36", "3.11.7") == (env.system.machine, env.system.glibc, env.system.python)


def test_this_machines_accelerate_env_gives_its_versions_and_memory():
    """`accelerate env`: its own list, System RAM in GiB as accelerate divides it."""
    pasted = _read("local-accelerate-env.txt")
    assert ("accelerate env",) == pasted.tools
    assert {"accelerate": "1.15.0", "numpy": "2.4.6", "torch": "2.13.0+cpu"} == _versions(pasted)
    assert int(23.54 * (1 << 30)) == pasted.environment.system.memory_bytes


def test_transformers_env_is_not_taken_for_accelerate_env():
    """`transformers env` prints 'Accelerate version' too, without accelerate's backticks."""
    pasted = _read("local-transformers-env.txt")
    assert ("transformers env",) == pasted.tools
    assert "5.24.0" == _versions(pasted)["transformers"]
    assert "1.15.0" == _versions(pasted)["accelerate"]


def test_collect_env_with_torchs_warning_gives_gpu_capability_and_archs():
    """pytorch#150733: RTX 5090 D, sm_120 from torch's warning, torch 2.6.0+cu126, driver 570."""
    env = _read("pytorch-150733-collect-env-rtx5090d.txt").environment
    assert env.nvml is not None
    device = env.nvml.devices[0]
    assert ("NVIDIA GeForce RTX 5090 D", (12, 0)) == (device.name, device.capability)
    assert "570.124.04" == env.nvml.driver_version
    assert ("2.6.0+cu126", "12.6") == (env.torch.version, env.torch.cuda)
    assert ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90") == env.torch.archs
    assert ("x86_64", "2.40") == (env.system.machine, env.system.glibc)


def test_vllm_collect_env_lists_every_gpu_of_a_wrapped_value():
    """vllm#29864: 'GPU models and configuration :' then one 'GPU n:' line per GPU."""
    pasted = _read("vllm-29864-collect-env-4x5090.txt")
    assert ("vllm collect-env",) == pasted.tools
    env = pasted.environment
    assert env.nvml is not None
    assert [0, 1, 2, 3] == [d.index for d in env.nvml.devices]
    assert {"NVIDIA GeForce RTX 5090"} == {d.name for d in env.nvml.devices}
    assert ("2.10.0.dev20251124+cu128", "12.8") == (env.torch.version, env.torch.cuda)
    assert "570.172.08" == env.nvml.driver_version


def test_vllm_collect_env_cut_to_its_pip_list_still_gives_torch_and_vllm():
    """vllm#21028: only the [pip3] lines and vLLM's section were pasted."""
    pasted = _read("vllm-21028-collect-env-tail.txt")
    assert ("vllm collect-env",) == pasted.tools
    versions = _versions(pasted)
    assert ("2.7.0+cu128", "0.9.2") == (versions["torch"], versions["vllm"])
    assert ("2.7.0+cu128", "12.8") == (
        pasted.environment.torch.version,
        pasted.environment.torch.cuda,
    )


def test_nvidia_smi_table_gives_gpus_memory_driver_and_its_cuda():
    """RLinf#255: two RTX 4090 of 24564 MiB, driver 550.163.01, CUDA 12.4, the table cut short."""
    env = _read("rlinf-255-nvidia-smi-2x4090.txt").environment
    assert env.nvml is not None
    assert ("550.163.01", 12040) == (env.nvml.driver_version, env.nvml.cuda_driver_version)
    assert [(0, 24564 << 20, (24564 - 507) << 20), (1, 24564 << 20, (24564 - 459) << 20)] == [
        (d.index, d.total_bytes, d.free_bytes) for d in env.nvml.devices
    ]
    assert "torch's version is not in the paste" == env.torch.error


def test_old_nvidia_smi_gives_its_processes_and_a_cut_name_as_printed():
    """pytorch#6551: driver 384.111 (no CUDA column), 'GeForce GTX 105...', Xorg and compiz."""
    env = _read("pytorch-6551-nvidia-smi-gtx1050.txt").environment
    assert env.nvml is not None
    assert ("384.111", None) == (env.nvml.driver_version, env.nvml.cuda_driver_version)
    assert "GeForce GTX 105..." == env.nvml.devices[0].name
    assert [(994, 271 << 20, "/usr/lib/xorg/Xorg"), (1709, 66 << 20, "compiz")] == [
        (p.pid, p.used_bytes, p.name) for p in env.nvml.processes
    ]


def test_nvidia_smi_header_in_backticks_gives_the_driver():
    """faster-whisper#1278: one header line quoted in Markdown backticks."""
    env = _read("faster-whisper-1278-nvidia-smi-header.txt").environment
    assert env.nvml is not None
    assert ("535.183.01", 12020) == (env.nvml.driver_version, env.nvml.cuda_driver_version)


def test_accelerate_env_with_a_gpu():
    """accelerate#3446: 'PyTorch version (GPU?): 2.3.0+cu121 (True)', 'GPU type: NVIDIA RTX A6000'."""
    env = _read("accelerate-3446-env-a6000.txt").environment
    assert env.nvml is not None
    assert ["NVIDIA RTX A6000"] == [d.name for d in env.nvml.devices]
    assert ("2.3.0+cu121", "12.1") == (env.torch.version, env.torch.cuda)


def test_transformers_env_of_a_cuda_torch_without_its_label_leaves_cuda_unknown():
    """transformers#40230: '2.7.0 (CUDA)' on aarch64: a CUDA build, which CUDA is not said."""
    env = _read("transformers-40230-env-gh200.txt").environment
    assert ("2.7.0", None, False) == (env.torch.version, env.torch.cuda, env.torch.cpu_only)
    assert "the paste does not say which CUDA torch 2.7.0 was built for (CUDA)" == env.torch.error
    assert "aarch64" == env.system.machine


def test_a_hand_written_list_is_not_a_report_tools_output():
    """mir-aidj/all-in-one#35 wrote its versions by hand: no tool printed them, nothing is read."""
    text = "Environment Information:\nPyTorch Version: 2.5.0+cu121\n\nCUDA Version: 12.1\n\n"
    assert read_pasted(text + "GPU Model: NVIDIA GeForce RTX 5090\n") is None


def test_quote_marks_and_fences_do_not_change_what_is_read():
    """A GitHub quote reply of a fenced collect_env reads as the output itself."""
    plain = (ENVS / "vllm-13497-collect-env-4090.txt").read_text(encoding="utf-8")
    quoted = "\n".join("> " + line for line in ["```", *plain.splitlines(), "```"])
    expected = _read("vllm-13497-collect-env-4090.txt").environment
    actual = read_pasted(quoted)
    assert actual is not None
    assert _unplaced(expected) == _unplaced(actual.environment)


def test_two_values_for_one_fact_say_so_and_the_later_is_used():
    """Two collect_env outputs (before and after an upgrade): the note names both lines."""
    first = "PyTorch version: 2.5.1+cu121\nCUDA used to build PyTorch: 12.1\n"
    second = "PyTorch version: 2.7.1+cu128\nCUDA used to build PyTorch: 12.8\n"
    pasted = read_pasted(first + "\n" + second)
    assert pasted is not None
    assert ("2.7.1+cu128", "12.8") == (
        pasted.environment.torch.version,
        pasted.environment.torch.cuda,
    )
    assert any("'2.5.1+cu121', line 1" in n and "line 4" in n for n in pasted.notes)


@pytest.mark.parametrize("name", sorted(p.name for p in ENVS.glob("*.txt")))
def test_every_fact_names_a_line_that_holds_its_value(name):
    """Each fact's line number points at the line of the paste it was read from."""
    lines = (ENVS / name).read_text(encoding="utf-8").splitlines()
    for fact in _read(name).facts:
        if fact.name.startswith("process "):
            continue  # shown as gpu, pid, MiB, name: read from one line, reordered
        head = fact.value.split()[0] if fact.value.split() else ""
        assert head in lines[fact.line - 1], (fact, lines[fact.line - 1])


@given(st.text(max_size=400))
def test_any_text_reads_or_is_none_without_raising(text):
    """Arbitrary text never raises: it describes an environment, or it is not a report."""
    pasted = read_pasted(text)
    assert pasted is None or pasted.tools


@given(st.lists(st.sampled_from(["", "```", "> ", "<details>", "~~~text"]), max_size=6))
def test_framing_lines_around_a_report_do_not_change_it(frames):
    """Fences, quote marks and <details> before a report leave its facts as they were."""
    text = (ENVS / "accelerate-3446-env-a6000.txt").read_text(encoding="utf-8")
    expected = read_pasted(text)
    actual = read_pasted("\n".join(frames) + "\n" + text)
    assert expected is not None
    assert actual is not None
    assert _unplaced(expected.environment) == _unplaced(actual.environment)


# -- pip check, ds_report, python -m bitsandbytes ------------------------------------------


def test_pip_check_s_lines_are_the_stack_s_broken_requirements():
    """Our own `pip check` on a broken set: a pin another version satisfies, a missing one."""
    from errkb.probes.stack import Broken

    stack = _read("local-pip-check.txt").environment.stack
    assert (
        Broken(distribution="transformers", version="4.46.0", requirement="tokenizers",
               required="tokenizers", installed=None),
        Broken(distribution="vllm", version="0.6.3", requirement="torch==2.4.0",
               required="torch", installed="2.5.1"),
    ) == stack.broken  # fmt: skip
    assert (None, {"transformers": "4.46.0", "vllm": "0.6.3", "torch": "2.5.1"}) == (
        stack.note,
        {d.name: d.version for d in stack.distributions},
    )


def test_pip_check_with_nothing_broken_says_the_set_was_checked():
    """pip's own line for a clean set: checked, nothing broken (not 'not checked')."""
    stack = read_pasted("No broken requirements found.\n").environment.stack
    assert ((), None) == (stack.broken, stack.note)


def test_ds_report_gives_torch_s_build_nvcc_and_deepspeed():
    """deepspeed#2503: torch 1.12.0+cu113, nvcc 11.3, DeepSpeed 0.7.5 and its op rows."""
    pasted = _read("deepspeed-2503-ds-report-tail.txt")
    env = pasted.environment
    facts = {f.name: f.value for f in pasted.facts}
    assert (("ds_report",), "1.12.0+cu113", "11.3", "0.7.5+unknown", "11.3") == (
        pasted.tools,
        env.torch.version,
        env.torch.cuda,
        _versions(pasted)["deepspeed"],
        facts["nvcc"],
    )


def test_ds_report_s_op_table_says_which_ops_are_installed_and_compatible():
    """deepspeed#5195: async_io not compatible (no libaio), fused_adam installed."""
    facts = {f.name: f.value for f in _read("deepspeed-5195-ds-report-ops.txt").facts}
    assert ("[NO] [NO]", "[YES] [OKAY]") == (facts["ds op async_io"], facts["ds op fused_adam"])


def test_bitsandbytes_report_gives_its_version_cuda_and_library():
    """bitsandbytes#361: 0.38.1 (from its egg's path), CUDA 12.1, capability 7.5."""
    pasted = _read("bitsandbytes-361-cuda121.txt")
    facts = {f.name: f.value for f in pasted.facts}
    assert ("0.38.1", "121 (CUDA 12.1)", "7.5", "libbitsandbytes_cuda121.so") == (
        _versions(pasted)["bitsandbytes"],
        facts["bnb cuda"],
        facts["bnb capability"],
        facts["bnb library"].rsplit("/", 1)[-1],
    )
    assert () == pasted.environment.extensions  # the paste is cut before it says the result


def test_bitsandbytes_cpu_library_is_said():
    """bitsandbytes#779: the CPU library, compiled without GPU support."""
    facts = {f.name: f.value for f in _read("bitsandbytes-779-cpu-library.txt").facts}
    assert ("compiled without GPU support", True) == (
        facts["bnb cpu library"],
        facts["bnb library"].endswith("libbitsandbytes_cpu.so"),
    )


def test_bitsandbytes_native_library_that_did_not_load_is_a_failed_extension():
    """bitsandbytes#1559: the CPU library cannot be opened: the extension probe's failure."""
    (ext,) = _read("bitsandbytes-1559-native-library-missing.txt").environment.extensions
    assert ("bitsandbytes", "libbitsandbytes_cpu.so", True) == (
        ext.distribution,
        ext.name,
        "cannot open shared object file" in (ext.error or ""),
    )
