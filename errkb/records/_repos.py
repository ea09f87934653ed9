"""Where the distributions errkb mines keep their source: repository, tag form, package folder.

A record mined from one of these leaves out what this table says (its ``repo``, and its
``githubUrl`` when that is the line at the tag of its newest site): the loader puts them back
(:func:`mined_link`). A pack of 58,000 records so carries no field that its others already say.
"""

from __future__ import annotations

__all__ = ["REPOS", "mined_link"]

#: distribution (PEP 503 name) -> (GitHub owner/name, release tag form, the repository folder
#: that holds the importable packages). The tag form and folder are read from each project's
#: releases; a distribution not listed keeps its repository and links in its records.
REPOS: dict[str, tuple[str, str, str]] = {
    "vllm": ("vllm-project/vllm", "v{}", ""),
    "transformers": ("huggingface/transformers", "v{}", "src/"),
    "torch": ("pytorch/pytorch", "v{}", ""),
    "chattts": ("2noise/ChatTTS", "v{}", ""),
    "accelerate": ("huggingface/accelerate", "v{}", "src/"),
    "huggingface-hub": ("huggingface/huggingface_hub", "v{}", "src/"),
    "peft": ("huggingface/peft", "v{}", "src/"),
    "safetensors": ("huggingface/safetensors", "v{}", "bindings/python/py_src/"),
    "tokenizers": ("huggingface/tokenizers", "v{}", "bindings/python/py_src/"),
    "bitsandbytes": ("bitsandbytes-foundation/bitsandbytes", "{}", ""),
    "flash-attn": ("Dao-AILab/flash-attention", "v{}", ""),
}


def mined_link(distribution: str, release: str, path: str, line: int) -> str | None:
    """The line ``path:line`` at ``release``'s tag, for a distribution of :data:`REPOS`.

    ``path`` is a record's ``filePath``: a Python file's path under site-packages (its
    repository folder is added), a native file's path in the source.

    >>> mined_link("transformers", "4.51.3", "transformers/activations.py", 40)
    'https://github.com/huggingface/transformers/blob/v4.51.3/src/transformers/activations.py#L40'
    """
    known = REPOS.get(distribution)
    if known is None:
        return None
    repo, tag, folder = known
    folder = folder if path.endswith(".py") else ""
    return f"https://github.com/{repo}/blob/{tag.format(release)}/{folder}{path}#L{line}"
