"""Version-skew errors raised for real by the installed transformers, and the records that explain them.

Code written for an older transformers meets the one installed in the test environment: a read
of a cache attribute that a release removed, and imports of names that a release removed. Each
case is skipped when the installed release still has the name (the records say which releases
lack it), so the test exercises the real message wherever it exists.
"""

from __future__ import annotations

from importlib import import_module

import pytest

import errkb

transformers = pytest.importorskip("transformers")
from transformers import DynamicCache  # noqa: E402 - only once transformers is known present


def _diagnosed(exc: BaseException) -> tuple[str, dict[str, object]]:
    """The top record's id and the facts of errkb's diagnosis of ``exc``."""
    diagnosis = errkb.diagnose(exc)
    assert diagnosis is not None
    assert diagnosis.findings, f"errkb knew nothing of {exc!r}"
    top = diagnosis.findings[0]
    return top.record.id, {fact.name: fact.value for fact in top.facts}


def test_seen_tokens_read_on_a_real_dynamic_cache() -> None:
    """4.54.0 removed DynamicCache.seen_tokens; the record names the release against the installed one."""
    cache = DynamicCache()
    if hasattr(cache, "seen_tokens"):
        pytest.skip(f"transformers {transformers.__version__} still has DynamicCache.seen_tokens")
    with pytest.raises(AttributeError) as caught:
        _ = cache.seen_tokens
    assert str(caught.value) == "'DynamicCache' object has no attribute 'seen_tokens'"
    record, facts = _diagnosed(caught.value)
    assert record == "transformers-dynamic-cache-seen-tokens-removed"
    assert facts["transformers"] == transformers.__version__
    assert str(facts["`seen_tokens`"]).startswith("removed in 4.54.0 (last in 4.53.3)")


@pytest.mark.parametrize(
    ("module", "name", "record"),
    [
        (
            "transformers.models.llama.modeling_llama",
            "LlamaFlashAttention2",
            "transformers-llama-flash-attention2-import-removed",
        ),
        (
            "transformers.models.llama.modeling_llama",
            "LLAMA_ATTENTION_CLASSES",
            "transformers-llama-attention-classes-import-removed",
        ),
        (
            "transformers.utils.import_utils",
            "is_torch_fx_available",
            "transformers-is-torch-fx-available-removed",
        ),
    ],
)
def test_import_of_a_removed_name(module: str, name: str, record: str) -> None:
    """``from module import name`` on the installed transformers, as remote model code does it."""
    if hasattr(import_module(module), name):
        pytest.skip(f"transformers {transformers.__version__} still has {module}.{name}")
    with pytest.raises(ImportError) as caught:
        exec(f"from {module} import {name}", {})  # the statement the reports show, run for real
    assert str(caught.value).startswith(f"cannot import name '{name}' from '{module}'")
    found, facts = _diagnosed(caught.value)
    assert found == record
    assert facts["transformers"] == transformers.__version__
