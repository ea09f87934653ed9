"""The python-import family: its records, where they rank, and its advice on pasted reports.

The texts are error lines users pasted into public issue trackers (each test cites the URL;
they are entries of tests/data/reports/corpus.jsonl). Pasted text is another machine's, so
the advice says only what the message and its frames say (probes off).
"""

from __future__ import annotations

import pytest

from errkb.advisors.python_import._family import LIBRARIES, SLUG, text
from errkb.diagnosis import explain
from errkb.match import Matcher
from errkb.options import Options
from errkb.registry import builtin_records_dir
from errkb.testing import record_dict, registry_from_dicts

PASTED = Options(probes=False)


def _top(message: str):
    diagnosis = explain(message, options=PASTED)
    assert diagnosis is not None, message
    return diagnosis.findings


def _advice(message: str):
    """The first finding of a pasted message, and its facts by name."""
    finding = _top(message)[0]
    return finding, {f.name: f.value for f in finding.facts}


@pytest.mark.parametrize("library", LIBRARIES, ids=lambda lib: lib.folder)
def test_each_record_file_is_what_the_family_writes(library):
    """records/<library>/python-import.json is derived from the one definition, unedited."""
    path = builtin_records_dir() / library.folder / f"{SLUG}.json"
    assert text(library) == path.read_text(encoding="utf-8")


# (URL, the error line as reported, the record that must come first)
REPORTS = [
    ("https://github.com/vllm-project/vllm/issues/5086",
     "ImportError: cannot import name 'LLM' from 'vllm' (unknown location)", "vllm-python-import"),
    ("https://github.com/2noise/ChatTTS/issues/55",
     "ModuleNotFoundError: No module named 'ChatTTS'", "chattts-python-import"),
    ("https://github.com/2noise/ChatTTS/issues/699",
     ("AttributeError: partially initialized module 'ChatTTS' has no attribute 'Chat' (most likely "
     "due to a circular import)"), "chattts-python-import"),
    ("https://github.com/huggingface/peft/issues/1283",
     ("ImportError: cannot import name 'PeftModel' from partially initialized module 'peft' (most "
     "likely due to a circular import) "), "peft-python-import"),
    ("https://github.com/bitsandbytes-foundation/bitsandbytes/issues/462",
     "AttributeError: module 'bitsandbytes' has no attribute 'nn'", "bitsandbytes-python-import"),
    ("https://github.com/Dao-AILab/flash-attention/issues/971",
     ("E   ImportError: cannot import name 'flash_attn_func' from 'flash_attn' "
     "(/usr/local/lib/python3.10/dist-packages/flash_attn/__init__.py)"), "flash-attn-python-import"),
    ("https://github.com/pytorch/pytorch/issues/6174",
     "ImportError: No module named torch", "torch-python-import"),
    ("https://github.com/ray-project/ray/issues/16126",
     "AttributeError: Module 'ray' has no attribute '_private'", "ray-python-import"),
    ("https://github.com/facebookresearch/xformers/issues/1252",
     "ModuleNotFoundError: No module named 'torch'\", however, torch is installed.",
     "torch-python-import"),
    ("https://github.com/pytorch/audio/issues/2277",
     "ModuleNotFoundError: No module named 'torchaudio.prototype'", "torchaudio-python-import"),
    ("https://github.com/deepspeedai/DeepSpeed/issues/2597",
     "AttributeError: module 'deepspeed' has no attribute 'ops'", "deepspeed-python-import"),
    ("https://github.com/niklasku/IF-webui/issues/4",
     "ModuleNotFoundError: No module named 'accelerate'", "accelerate-python-import"),
    ("https://github.com/LiuHC0428/LAW-GPT/issues/15",
     "ImportError: cannot import name 'get_peft_model' from 'peft' (unknown location)",
     "peft-python-import"),
    ("https://github.com/maybleMyers/H1111/issues/45",
     "SUBPROCESS: ModuleNotFoundError: No module named 'safetensors'", "safetensors-python-import"),
    ("https://github.com/triton-lang/triton/issues/3251",
     "[rank0]: ImportError: cannot import name 'backends' from 'triton.backends' (unknown location)",
     "triton-python-import"),
]  # fmt: skip


#: Where each example of the family definition was reported.
EXAMPLE_URLS = {
    "ModuleNotFoundError: No module named 'accelerate'": "https://github.com/niklasku/IF-webui/issues/4",
    "Error while finding module specification for 'accelerate.commands.launch' (ModuleNotFoundError: No module named 'accelerate')": "https://github.com/LarryJane491/Lora-Training-in-Comfy/issues/44",
    "AttributeError: module 'bitsandbytes' has no attribute 'nn'": "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/462",
    "AttributeError: module 'bitsandbytes.nn' has no attribute 'Linear4bit'": "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/416",
    "ModuleNotFoundError: No module named 'ChatTTS'": "https://github.com/2noise/ChatTTS/issues/55",
    "AttributeError: partially initialized module 'ChatTTS' has no attribute 'Chat' (most likely due to a circular import)": "https://github.com/2noise/ChatTTS/issues/699",
    "AttributeError: module 'deepspeed' has no attribute 'ops'": "https://github.com/deepspeedai/DeepSpeed/issues/2597",
    "ModuleNotFoundError: No module named 'deepspeed'": "https://github.com/deepspeedai/DeepSpeed/issues/472",
    "ModuleNotFoundError: No module named 'flash_attn.flash_attention'": "https://github.com/Dao-AILab/flash-attention/issues/739",
    "AttributeError: module 'flash_attn' has no attribute 'flash_attn_varlen_qkvpacked_func'": "https://github.com/Dao-AILab/flash-attention/issues/745",
    "ModuleNotFoundError: No module named 'huggingface_hub'": "https://github.com/huggingface/huggingface_hub/issues/2307",
    "ModuleNotFoundError: No module named 'huggingface_hub.errors'": "https://github.com/huggingface/peft/issues/2116",
    "ModuleNotFoundError: No module named 'peft'": "https://github.com/oobabooga/textgen/issues/2453",
    "ImportError: cannot import name 'get_peft_model' from 'peft' (unknown location)": "https://github.com/LiuHC0428/LAW-GPT/issues/15",
    "ModuleNotFoundError: No module named 'ray.tune'; 'ray' is not a package": "https://github.com/ray-project/ray/issues/10875",
    "AttributeError: module 'ray' has no attribute 'remote'": "https://github.com/ray-project/ray/issues/5768",
    "AttributeError: module 'safetensors' has no attribute 'torch'": "https://github.com/safetensors/safetensors/issues/128",
    "ModuleNotFoundError: No module named 'safetensors'": "https://github.com/maybleMyers/H1111/issues/45",
    "ModuleNotFoundError: No module named 'sentencepiece'": "https://github.com/google/sentencepiece/issues/925",
    "AttributeError: module 'sentencepiece' has no attribute 'SentencePieceTrainer'": "https://github.com/google/sentencepiece/issues/625",
    "ModuleNotFoundError: No module named 'tokenizers.tokenizers'": "https://github.com/huggingface/tokenizers/issues/1619",
    "ImportError: cannot import name 'BPETokenizer' from 'tokenizers' (C:\\tools\\miniconda3\\envs\\tokenizer\\lib\\site-packages\\tokenizers\\__init__.py)": "https://github.com/huggingface/tokenizers/issues/152",
    "ModuleNotFoundError: No module named 'torch'": "https://github.com/Dao-AILab/flash-attention/issues/1162",
    "AttributeError: module 'torch' has no attribute 'classes'": "https://github.com/pytorch/audio/issues/878",
    "ModuleNotFoundError: No module named 'torchaudio.prototype'": "https://github.com/pytorch/audio/issues/2277",
    "AttributeError: module 'torchaudio' has no attribute 'open'": "https://github.com/pytorch/audio/issues/3481",
    "ImportError: cannot import name 'pipeline' from 'transformers' (unknown location)": "https://github.com/huggingface/transformers/issues/10277",
    "ModuleNotFoundError: No module named 'transformers'": "https://github.com/huggingface/transformers/issues/12542",
    "ImportError: cannot import name 'backends' from 'triton.backends' (unknown location)": "https://github.com/triton-lang/triton/issues/5773",
    "AttributeError: module 'triton.language' has no attribute 'make_block_ptr'": "https://github.com/triton-lang/triton/issues/2024",
    "ImportError: cannot import name 'LLM' from 'vllm' (unknown location)": "https://github.com/vllm-project/vllm/issues/5086",
    "AttributeError: module 'vllm' has no attribute '__version__'": "https://github.com/vllm-project/vllm/issues/4554",
    "AttributeError: module 'xformers.ops' has no attribute 'AttentionOpDispatch'": "https://github.com/facebookresearch/xformers/issues/1129",
    "ModuleNotFoundError: No module named 'xformers.version'": "https://github.com/facebookresearch/xformers/issues/735",
}  # fmt: skip


def test_every_example_of_the_family_was_reported_and_comes_to_its_library():
    """Each example of the definition has its report's URL and finds its library's record."""
    examples = {e: lib for lib in LIBRARIES for e in lib.examples}
    assert set(EXAMPLE_URLS) == set(examples)
    for example, library in examples.items():
        wanted = f"{library.folder.replace('_', '-')}-{SLUG}"
        assert wanted == _top(example)[0].record.id, EXAMPLE_URLS[example]


@pytest.mark.parametrize(("url", "line", "record"), REPORTS, ids=[r[0] for r in REPORTS])
def test_reported_import_errors_are_recognised(url, line, record):
    """Each reported error line comes to its library's record of the family."""
    assert record == _top(line)[0].record.id, url


def test_a_torch_message_is_not_torchaudios():
    """A module name ends where the message's does: torch's record never takes torchaudio."""
    found = _top("ModuleNotFoundError: No module named 'torchaudio.prototype'")
    assert "torchaudio-python-import" == found[0].record.id
    assert "torch-python-import" not in [f.record.id for f in found]


# -- ranking ----------------------------------------------------------------------------------


def test_a_hand_written_removed_name_ranks_above_the_fallback():
    """records/transformers/is-torch-fx-available-removed.json names the name: it comes first."""
    found = _top(
        "ImportError: cannot import name 'is_torch_fx_available' from "
        "'transformers.utils.import_utils' (/usr/lib/python3/site-packages/transformers/utils/"
        "import_utils.py)"
    )
    ids = [f.record.id for f in found]
    assert "transformers-is-torch-fx-available-removed" == ids[0]
    assert "transformers-python-import" in ids[1:]


def test_a_mined_skew_record_ranks_above_the_fallback_and_does_not_fold_into_it():
    """The mined record of a removed name is a finding of its own, above the family's."""
    found = _top(
        "ImportError: cannot import name 'is_torch_less_than_1_11' from "
        "'transformers.pytorch_utils'"
    )
    assert found[0].match.mined
    assert "transformers.pytorch_utils.is_torch_less_than_1_11" == found[0].record.skew.name
    fallback = next(f for f in found if f.record.id == "transformers-python-import")
    assert () == fallback.match.also


def test_the_vllm_c_record_ranks_above_the_fallback():
    """`No module named 'vllm._C'` has its own record (a source tree): it comes first."""
    found = _top("ModuleNotFoundError: No module named 'vllm._C'")
    assert ["vllm-compiled-module-missing", "vllm-python-import"] == [
        f.record.id for f in found[:2]
    ]


def test_fallback_tier_below_mined_whatever_the_scores():
    """The tiers, on records built here: hand-written, mined, then the fallback, by tag alone."""
    message = "cannot import name 'widget' from 'acme.tools'"
    fallback = record_dict(
        id="acme-python-import", repo="acme/acme", errorClass="ImportError",
        messagePattern=r"cannot import name '(?P<name>\w+)' from '(?P<module>acme(?:\.\w+)*)'",
        tags=["fallback"],
    )  # fmt: skip
    mined = record_dict(
        id="acme-mined", repo="acme/acme", tags=["mined"], messagePattern="import name 'widget'"
    )
    written = record_dict(id="acme-written", repo="acme/acme", messagePattern="'widget' from")
    matcher = Matcher(registry_from_dicts([fallback, mined, written]).records)
    found = matcher.match(message, ImportError)
    # The mined record folds into the hand-written one of its library (the tier rule), never
    # into the fallback.
    assert ["acme-written", "acme-python-import"] == [m.record.id for m in found]
    assert 1 == len(found[0].also)
    assert found[1].score > found[0].score  # the score ranks within a tier only
    alone = Matcher(registry_from_dicts([fallback, mined]).records).match(message, ImportError)
    assert ["acme-mined", "acme-python-import"] == [m.record.id for m in alone]
    assert () == alone[1].also  # a mined match never folds into a fallback


def test_an_unknown_class_never_takes_the_fallback():
    """Under a class errkb cannot place, Python's words are another library's: no fallback."""
    message = "No module named 'vllm'"
    assert "vllm-python-import" == _top(f"ModuleNotFoundError: {message}")[0].record.id
    diagnosis = explain(f"nosuchpkg.SomeError: {message}", options=PASTED)
    ids = [f.record.id for f in diagnosis.findings] if diagnosis else []
    assert "vllm-python-import" not in ids


def test_a_library_error_quoting_python_words_is_not_the_fallbacks():
    """triton's CompilationError quoting an AttributeError is triton's own error, not Python's.

    https://github.com/triton-lang/triton/issues/8562
    """
    text = (
        "[rank0]: triton.compiler.errors.CompilationError: at 81:12:\n"
        "[rank0]:         a = tl._tensor_descriptor_load(\n"
        "[rank0]:             ^\n"
        "[rank0]: AttributeError(\"module 'triton.language' has no attribute "
        "'_tensor_descriptor_load'\")"
    )
    diagnosis = explain(text, options=PASTED)
    ids = [f.record.id for f in diagnosis.findings] if diagnosis else []
    assert "triton-python-import" not in ids


# -- advice on pasted reports -----------------------------------------------------------------


def test_unknown_location_is_a_namespace_package_and_says_how_to_find_it():
    """vllm#5086: a folder named vllm without __init__.py; no machine is assumed."""
    finding = _top("ImportError: cannot import name 'LLM' from 'vllm' (unknown location)")[0]
    fix = finding.solutions[0].text
    assert "namespace package" in fix
    assert "import vllm; print(list(vllm.__path__))" in fix
    assert "python" not in {f.name for f in finding.facts}  # not this machine's interpreter
    assert finding.example_fix is None  # the record's example renames a file: not this case


def test_the_circular_import_names_the_users_file_from_the_message():
    """A pasted location of a circular import outside site-packages is the user's own file.

    The message is the real Python 3.8+ form with its location, as the integration test raises
    it; peft#1283's paste (https://github.com/huggingface/peft/issues/1283) left it out.
    """
    finding, facts = _advice(
        "ImportError: cannot import name 'PeftModel' from partially initialized module 'peft' "
        "(most likely due to a circular import) (/home/u/train/peft.py)"
    )
    assert "/home/u/train/peft.py" == facts["shadowed by"]
    assert "mv peft.py peft_demo.py" in finding.example_fix.after  # the record's own example
    assert finding.solutions[0].text.startswith("Rename /home/u/train/peft.py:")


def test_the_circular_import_without_a_path_says_what_is_not_known():
    """ChatTTS#699 gives no path: the advice says none was seen, and where to look."""
    finding, facts = _advice(
        "AttributeError: partially initialized module 'ChatTTS' has no attribute 'Chat' (most "
        "likely due to a circular import)"
    )
    assert facts["circular import"].startswith("no file named ChatTTS.py outside site-packages")
    assert {} == dict(finding.solutions[0].settings)  # no path is claimed


def test_not_a_package_names_the_file_from_the_traceback():
    """ray#10875: the frame of home/rl/project/ray.py is the file that shadows ray."""
    text = (
        "import ray\nTraceback (most recent call last):\n"
        '  File "<stdin>", line 1, in <module>\n'
        '  File "home/rl/project/ray.py", line 2, in <module>\n'
        "    import ray.tune as tune\n"
        "ModuleNotFoundError: No module named 'ray.tune'; 'ray' is not a package"
    )
    finding = _top(text)[0]
    assert "ray-python-import" == finding.record.id
    assert "home/rl/project/ray.py" == finding.solutions[0].settings["path"]


def test_a_name_missing_from_the_installed_package_states_the_release_data_read():
    """flash-attention#971: the installed package lacks the name; no release is invented."""
    finding, facts = _advice(
        "ImportError: cannot import name 'flash_attn_func' from 'flash_attn' "
        "(/usr/local/lib/python3.10/dist-packages/flash_attn/__init__.py)"
    )
    assert (
        "/usr/local/lib/python3.10/dist-packages/flash_attn/__init__.py" == facts["imported from"]
    )
    assert facts["`flash_attn.flash_attn_func`"].startswith(
        "no change of it is recorded in errkb's release data of flash-attn ("
    )
    assert not finding.solutions[0].settings
