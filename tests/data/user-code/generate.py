"""Messages Python raises for a user's own code: the set no library record may claim.

    python tests/data/user-code/generate.py    # rewrites messages.jsonl beside this file

Each line of ``messages.jsonl`` is ``{"shape", "errorClass", "message"}``: a common keyword or
attribute name (``device``, ``config``, ``labels``, ...) crossed with a user's class, function or
module (``MyModel``, ``Net``, ``mymodule``, ...) in every wording Python uses for it: the bare
``forward()`` of Python 3.9 and of a module-level function, the qualified ``MyModel.forward()``
of 3.10 and later, missing arguments, attributes of an instance, a class or a module, names
that cannot be imported and modules that are not found. ``tests/integration/test_user_code.py``
raises each shape for real and checks that this Python words it as :data:`SHAPES` does.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "messages.jsonl"

#: Each shape: the exception class, and the message with its parts as ``{names}``.
SHAPES: dict[str, tuple[str, str]] = {
    "call-bare-kw": ("TypeError", "{func}() got an unexpected keyword argument '{name}'"),
    "call-kw": ("TypeError", "{cls}.{func}() got an unexpected keyword argument '{name}'"),
    "call-bare-missing": ("TypeError", "{func}() missing 1 required positional argument: '{name}'"),
    "call-missing": (
        "TypeError",
        "{cls}.{func}() missing 1 required positional argument: '{name}'",
    ),
    "call-missing-two": (
        "TypeError",
        "{cls}.{func}() missing 2 required positional arguments: '{name}' and '{other}'",
    ),
    "call-missing-kwonly": (
        "TypeError",
        "{cls}.{func}() missing 1 required keyword-only argument: '{name}'",
    ),
    "object-attr": ("AttributeError", "'{cls}' object has no attribute '{name}'"),
    # The hint of 3.10 and later: in the printed traceback, not in str(exc).
    "object-attr-hint": (
        "AttributeError",
        "'{cls}' object has no attribute '{name}'. Did you mean: '{other}'?",
    ),
    "type-attr": ("AttributeError", "type object '{cls}' has no attribute '{name}'"),
    "module-attr": ("AttributeError", "module '{module}' has no attribute '{name}'"),
    "import-name": ("ImportError", "cannot import name '{cls}' from '{module}' ({path})"),
    "no-module": ("ModuleNotFoundError", "No module named '{module}'"),
}

#: Keyword, argument and attribute names common in ML code; several are also the names of
#: library keywords and members, which is the point: the class decides, not the name.
NAMES = (
    "device", "config", "dtype", "tokenizer", "path", "batch_size", "output_attentions",
    "labels", "attention_mask", "model", "optimizer", "lr", "num_workers", "input_ids",
    "hidden_states", "return_dict", "use_cache", "cache_dir", "max_length", "seed", "epochs",
    "callbacks", "scheduler", "pixel_values", "past_key_values", "x", "generate",
    "from_pretrained", "contrastive_search", "get_max_length", "prepare_inputs_for_generation",
    "gradient_checkpointing_enable", "to_legacy_cache", "save_pretrained", "task",
    "cache_position", "seen_tokens",
)  # fmt: skip
#: A user's classes.
CLASSES = (
    "MyModel", "Trainer2", "Net", "MyThing", "Encoder", "MyDataset", "CustomCallback",
    "Classifier", "MyTrainer", "DataModule", "LitModel", "TextDataset", "MyConfig", "Runner",
)  # fmt: skip
#: Methods and functions of a user's code.
FUNCTIONS = ("__init__", "forward", "fit", "train", "step", "predict", "__call__", "encode")
#: A user's modules.
MODULES = (
    "mymodule", "utils", "models", "my_project.models", "src.data", "helpers", "dataset",
    "common.layers",
)  # fmt: skip
#: Misspelt names with the name Python suggests for them.
HINTS = (
    ("lables", "labels"), ("devices", "device"), ("optimiser", "optimizer"),
    ("tokeniser", "tokenizer"), ("batchsize", "batch_size"), ("num_worker", "num_workers"),
    ("configs", "config"), ("attention_masks", "attention_mask"),
)  # fmt: skip


def message(shape: str, **parts: str) -> str:
    """The message of ``shape`` with its parts filled in."""
    return SHAPES[shape][1].format(**parts)


def _cycle(values: tuple[str, ...], start: int) -> itertools.cycle[str]:
    return itertools.cycle(values[start:] + values[:start])


def messages() -> list[dict[str, str]]:
    """The whole set, in a fixed order, each message once."""
    out: list[dict[str, str]] = []

    def add(shape: str, **parts: str) -> None:
        out.append(
            {"shape": shape, "errorClass": SHAPES[shape][0], "message": message(shape, **parts)}
        )

    for i, name in enumerate(NAMES):
        add("call-bare-kw", func=FUNCTIONS[i % len(FUNCTIONS)], name=name)
        add("call-bare-missing", func=FUNCTIONS[(i + 3) % len(FUNCTIONS)], name=name)
        add("module-attr", module=MODULES[i % len(MODULES)], name=name)
        half = CLASSES[i % 2 :: 2]
        for cls, func in zip(half, _cycle(FUNCTIONS, i % len(FUNCTIONS)), strict=False):
            add("call-kw", cls=cls, func=func, name=name)
            add("object-attr", cls=cls, name=name)
        for cls in CLASSES[i % 3 :: 3]:
            add("call-missing", cls=cls, func="forward", name=name)
            add("type-attr", cls=cls, name=name)
        other = NAMES[(i + 1) % len(NAMES)]
        cls = CLASSES[i % len(CLASSES)]
        add("call-missing-two", cls=cls, func="__init__", name=name, other=other)
        add("call-missing-kwonly", cls=cls, func="step", name=name)
    for (name, other), cls in zip(HINTS, CLASSES, strict=False):
        add("object-attr-hint", cls=cls, name=name, other=other)
    for module in MODULES:
        top = module.partition(".")[0]
        add("no-module", module=module)
        for cls in CLASSES[:4]:
            add("import-name", cls=cls, module=module, path=f"/home/me/project/{top}/__init__.py")
    unique: dict[str, dict[str, str]] = {}
    for m in out:
        unique.setdefault(m["message"], m)
    return list(unique.values())


def main() -> None:
    """Write :data:`OUT`."""
    with OUT.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(m) + "\n" for m in messages())


if __name__ == "__main__":
    main()
