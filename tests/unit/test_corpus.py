"""The corpus of real error reports is well formed (its recognition rates are measured, not tested).

``benchmarks/corpus.py`` measures how often errkb names the right record for these texts; this
test only checks that every entry says where it came from and carries labels the measurement
can use.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"
LIBRARIES = {
    "vllm": {"vllm-project/vllm"},
    "ChatTTS": {"2noise/ChatTTS"},
    "transformers": {"huggingface/transformers"},
    "torch": {"pytorch/pytorch"},
    "huggingface_hub": {"huggingface/huggingface_hub"},
    "bitsandbytes": {"bitsandbytes-foundation/bitsandbytes", "TimDettmers/bitsandbytes"},
    "flash-attn": {"Dao-AILab/flash-attention"},
    "accelerate": {"huggingface/accelerate"},
    "safetensors": {"huggingface/safetensors", "safetensors/safetensors"},
    "tokenizers": {"huggingface/tokenizers"},
    "peft": {"huggingface/peft"},
    "torchaudio": {"pytorch/audio"},
    "ray": {"ray-project/ray"},
    "sentencepiece": {"google/sentencepiece"},
    "triton": {"triton-lang/triton", "openai/triton"},
    "xformers": {"facebookresearch/xformers"},
    "deepspeed": {"deepspeedai/DeepSpeed", "microsoft/DeepSpeed"},
}
URL = re.compile(r"https://github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/\d+")
KEYS = {"id", "library", "url", "query", "text", "raisedBy", "subject", "errorLine", "cut"}


def _entries() -> list[dict[str, object]]:
    with (REPORTS / "corpus.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


ENTRIES = _entries()


def test_the_corpus_is_large_enough_and_its_ids_and_urls_are_unique() -> None:
    assert len(ENTRIES) >= 200
    ids = [e["id"] for e in ENTRIES]
    urls = [e["url"] for e in ENTRIES]
    assert len(set(ids)) == len(ids)
    assert len(set(urls)) == len(urls)


@pytest.mark.parametrize("entry", ENTRIES, ids=[str(e["id"]) for e in ENTRIES])
def test_each_entry_names_its_issue_and_carries_usable_labels(entry: dict[str, object]) -> None:
    assert set(entry) == KEYS
    library = entry["library"]
    assert library in LIBRARIES
    assert str(entry["id"]).startswith(f"{library}-")
    match = URL.fullmatch(str(entry["url"]))
    assert match, entry["url"]
    assert match.group(1) in LIBRARIES[str(library)]
    text, line = str(entry["text"]), str(entry["errorLine"])
    assert line.strip()
    assert line in text
    # The error line carries an exception name and its message, as the selection rule asks.
    assert re.search(r"\w(?:Error|Exception): \S", line), line
    assert isinstance(entry["raisedBy"], str)
    assert entry["raisedBy"]
    assert entry["subject"] is None or isinstance(entry["subject"], str)
    assert isinstance(entry["cut"], bool)
    assert str(entry["query"]).strip()


def test_the_readme_states_the_rule_and_every_library() -> None:
    readme = (REPORTS / "README.md").read_text(encoding="utf-8")
    assert "## The rule" in readme
    for library in LIBRARIES:
        assert f"| {library} |" in readme
