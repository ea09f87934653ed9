from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import errkb
from errkb import Options
from errkb._redact import _RULES, redact
from errkb.render import render
from errkb.testing import record_dict, registry_from_dicts


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("token=hf_AbCdEfGhIjKlMnOpQrStUvWx used", "hf_AbCdEfGhIjKlMnOpQrStUvWx"),
        (
            "401 for url https://huggingface.co/api?t=hf_abcdefghijklmnopqrstu",
            "hf_abcdefghijklmnopqrstu",
        ),
        ("OpenAI(api_key='sk-proj-abcdefghijklmnop1234')", "sk-proj-abcdefghijklmnop1234"),
        ("headers: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "eyJhbGciOiJIUzI1NiJ9"),
        ("curl -H 'Authorization: token ghp_0123456789abcdef'", "ghp_0123456789abcdef"),
        ("connecting to postgres://admin:Sup3rS3cret@db:5432/x", "Sup3rS3cret"),
        ("HF_TOKEN=abcdefghij1234567890 python serve.py", "abcdefghij1234567890"),
        ("password: correct-horse-battery", "correct-horse-battery"),
        ("aws key AKIAIOSFODNN7EXAMPLE leaked", "AKIAIOSFODNN7EXAMPLE"),
    ],
)
def test_each_kind_of_secret_is_masked(text, secret):
    """Tokens, keys, bearer headers and passwords in URLs never survive redaction."""
    out = redact(text)
    assert secret not in out
    assert "***" in out


@pytest.mark.parametrize(
    "text",
    [
        "The model's max seq len (32768) is larger than the maximum number of tokens",
        "max_num_batched_tokens=2048 tokenizer_mode=auto",
        "https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/worker/worker.py#L665",
    ],
)
def test_ordinary_text_is_left_alone(text):
    """Messages about tokens and URLs without credentials are not mangled."""
    assert text == redact(text)


def test_secrets_in_messages_are_masked_in_text_and_json():
    """A matched message carrying a Hub token and a URL password: masked in both outputs."""
    registry = registry_from_dicts(
        [
            record_dict(
                id="acme-auth",
                messagePattern=r"Unauthorized for url (?P<url>\S+)",
                solutions=["Log in."],
            )
        ]
    )
    message = "Unauthorized for url https://bob:hunter2hunter2@hub.local/x?token=hf_abcdefghijklmnopqrstuv"
    diagnosis = errkb.explain(message, registry=registry)
    as_json = json.dumps(diagnosis.to_dict())
    out = io.StringIO()
    render(diagnosis, Options(file=out, color=False))
    for shown in (as_json, out.getvalue()):
        assert "hunter2hunter2" not in shown
        assert "hf_abcdefghijklmnopqrstuv" not in shown
        assert "***" in shown


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("OPENAI_API_KEY=sk-abc123DEF456ghi789 python x.py", "sk-abc123DEF456ghi789"),
        ("HUGGING_FACE_HUB_TOKEN=abcdefghij1234567890", "abcdefghij1234567890"),
        (
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        ("WANDB_API_KEY=0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
        ("export HUGGING_FACE_HUB_TOKEN='Ab12Cd34Ef56'", "Ab12Cd34Ef56"),
        ('login(token="hf_token")', "hf_token"),  # quoted: a literal, whatever it looks like
    ],
)
def test_environment_style_secrets_are_masked(text, secret):
    """Names that end in a secret word after an underscore (the env-var form) are caught too."""
    out = redact(text)
    assert secret not in out
    assert "***" in out


@pytest.mark.parametrize(
    "code",
    [
        'LLM(model="m", token=os.environ["HF_TOKEN"])',
        "OpenAI(api_key=args.api_key, base_url=url)",
        "login(token=get_token())",
        "snapshot_download(repo, token=hf_token)",
        "client = Client(api_key=os.getenv('OPENAI_API_KEY'))",
    ],
)
def test_code_that_reads_a_secret_by_name_is_not_a_secret(code):
    """An example fix that passes os.environ["HF_TOKEN"] must stay code that runs."""
    import ast

    assert code == redact(code)
    ast.parse(redact(code))


_SECRETISH = st.lists(
    st.sampled_from(
        [*"aAkKyYeEsStT_-:=@/. '\"", "key", "KEY", "token", "Token", "secret", "passwd",
         "password", "bearer ", "authorization: ", "hf_", "sk-", "AKIA", "ASIA", "://",
         "\u017f", "\u212a", "\u0130", "\u2003", "\x1c", "0123456789abcdef"]
    ),
    max_size=24,
).map("".join)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(_SECRETISH)
def test_a_rule_runs_on_every_text_its_pattern_matches(text):
    """The words a rule waits for, and what follows them, are in every text its pattern
    matches (a rule that did not run would leave a secret): casefolded, as the ignore-case
    patterns match the long s, the Kelvin sign and the dotted capital I."""
    import regex

    for words, fold, after, pattern, _ in _RULES:
        if regex.search(pattern, text):
            seen = text.casefold() if fold else text
            assert any(word in seen for word in words), (pattern, text)
            assert after is None or re.search(after, seen), (pattern, text)
