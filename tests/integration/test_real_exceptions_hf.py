"""Real errors from the Hugging Face stack, raised by the installed libraries and looked up in errkb.

Every test provokes one error for real (tiny configs built locally, files written into tmp_path,
and, for Hub answers, a throw-away HTTP server on 127.0.0.1), then checks that errkb's best match
for the exception's message and class is the record written for it. Nothing here reaches the
network: the Hub is either switched to offline mode or pointed at the local server.
"""

from __future__ import annotations

import importlib.util
import json
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import top_match

import errkb

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")
pytest.importorskip("huggingface_hub")


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _llama_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        num_hidden_layers=1,
        hidden_size=16,
        intermediate_size=32,
        num_attention_heads=2,
        num_key_value_heads=2,
        vocab_size=32,
        max_position_embeddings=64,
    )


def _word_level_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"a": 0, "b": 1, "c": 2, "[UNK]": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """Hub offline mode (the flag is read at import, so the module constant is patched too)."""
    import huggingface_hub.constants as hub_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    return tmp_path / "hf-cache"


class _HubStub(BaseHTTPRequestHandler):
    """Answers every request with the status and Hub headers set on the server, and a GET with
    its ``body`` (empty unless set)."""

    def _answer(self) -> bytes:
        status, headers = self.server.reply  # type: ignore[attr-defined]
        body = getattr(self.server, "body", b"")
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return body

    def do_HEAD(self):
        self._answer()

    def do_GET(self):
        self.wfile.write(self._answer())

    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def hub_stub(monkeypatch, tmp_path):
    """A local HTTP server standing in for huggingface.co; set `.reply = (status, headers)`."""
    import huggingface_hub.constants as hub_constants

    server = ThreadingHTTPServer(("127.0.0.1", 0), _HubStub)
    server.reply = (404, {"X-Error-Code": "RepoNotFound"})  # type: ignore[attr-defined]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hub_constants, "ENDPOINT", url)
    monkeypatch.setattr(
        hub_constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        url + "/{repo_id}/resolve/{revision}/{filename}",
    )
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    server.url = url  # type: ignore[attr-defined]
    server.cache = tmp_path / "hf-cache"  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


GATED_REPLY = (
    403,
    {
        "X-Error-Code": "GatedRepo",
        "X-Error-Message": "Access to model someorg/gated is restricted and you are not in the authorized list. "
        "Visit https://huggingface.co/someorg/gated to ask for access.",
    },
)


# --------------------------------------------------------------------------------------------
# transformers
# --------------------------------------------------------------------------------------------


def test_missing_pad_token():
    """Batch padding with a tokenizer that has no pad token raises the missing-pad-token error."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_word_level_tokenizer())

    with pytest.raises(ValueError) as info:
        tokenizer(["a", "a b"], padding=True)
    top = top_match(info.value)
    assert "transformers-missing-pad-token" == top.record.id


def test_pipeline_without_task_or_model():
    """Today's wording, raised; 4.13-4.18's (two spaces missing), as pasted in
    https://github.com/huggingface/transformers/issues/16905."""
    from transformers import pipeline

    with pytest.raises(RuntimeError) as info:
        pipeline()
    assert "transformers-pipeline-without-task-or-model" == top_match(info.value).record.id
    old = (
        "RuntimeError: Impossible to instantiate a pipeline without either a task or a "
        "modelbeing specified.Please provide a task class or a model"
    )
    diagnosis = errkb.explain(old, options=errkb.Options(probes=False))
    assert diagnosis.top.record.id == "transformers-pipeline-without-task-or-model"


def test_tokenizer_not_in_model_name_list_of_transformers_3():
    """2.1.1-3.4.0's wording, as pasted (cut) in
    https://github.com/huggingface/transformers/issues/4576."""
    text = (
        "OSError: Model name 'transfo-xl-wt103' was not found in tokenizers model name list "
        "(transfo-xl-wt103). We assumed 'transfo-xl-wt103' was a path, a model identifier, or "
        "url to a directory containing vo"
    )
    top = errkb.explain(text, options=errkb.Options(probes=False)).top
    assert top.record.id == "transformers-tokenizer-not-in-model-name-list"
    assert top.match.captures["model_id"] == "transfo-xl-wt103"


def test_generate_input_longer_than_max_length():
    """generate() with a prompt longer than max_length is refused and recognised."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(_llama_config())

    with pytest.raises(ValueError) as info:
        model.generate(torch.ones(1, 10, dtype=torch.long), max_length=5)
    top = top_match(info.value)
    assert "transformers-generate-input-longer-than-max-length" == top.record.id
    assert top.captures["input_length"] == 10
    assert top.captures["max_length"] == 5


def test_trust_remote_code_required(tmp_path, offline):
    """A config with an auto_map loaded with trust_remote_code=False asks for trust_remote_code."""
    from transformers import AutoConfig

    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "custom",
                "auto_map": {"AutoConfig": "configuration_custom.CustomConfig"},
            }
        )
    )

    with pytest.raises(ValueError) as info:
        AutoConfig.from_pretrained(str(tmp_path), trust_remote_code=False)
    top = top_match(info.value)
    assert "transformers-trust-remote-code-required" == top.record.id


def test_unrecognized_configuration_class():
    """AutoModelForCausalLM.from_config on a vision-only config is recognised."""
    from transformers import AutoModelForCausalLM, CLIPVisionConfig

    with pytest.raises(ValueError) as info:
        AutoModelForCausalLM.from_config(CLIPVisionConfig())
    top = top_match(info.value)
    assert "transformers-unrecognized-configuration-class" == top.record.id
    assert top.captures["auto_class"] == "AutoModelForCausalLM"


def test_config_missing_model_type(tmp_path):
    """AutoConfig on a folder whose config.json lacks model_type is recognised."""
    from transformers import AutoConfig

    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 4}))

    with pytest.raises(ValueError) as info:
        AutoConfig.from_pretrained(str(tmp_path))
    top = top_match(info.value)
    assert "transformers-config-missing-model-type" == top.record.id


def test_model_type_not_recognized(tmp_path):
    """AutoConfig on an unknown model_type is recognised and the model type captured."""
    from transformers import AutoConfig

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "zorblax"}))

    with pytest.raises(ValueError) as info:
        AutoConfig.from_pretrained(str(tmp_path))
    top = top_match(info.value)
    assert "transformers-model-type-not-recognized" == top.record.id
    assert top.captures["model_type"] == "zorblax"


def test_config_mapping_keyerror_does_not_displace_the_valueerror_of_4_37_on(tmp_path):
    """4.37 and later raise a ValueError over the table's KeyError: its record stays first."""
    from transformers import AutoConfig

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "zorblax"}))
    with pytest.raises(ValueError) as info:
        AutoConfig.from_pretrained(str(tmp_path))
    assert isinstance(info.value.__context__, KeyError)
    diagnosis = errkb.diagnose(info.value, options=errkb.Options(probes=False))
    assert diagnosis.top.record.id == "transformers-model-type-not-recognized"


@pytest.mark.parametrize(
    ("url", "text"),
    [
        # A rich traceback cut to its last box: the model type alone tells it.
        (
            "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/413",
            "\u2502 > 579 \u2502   \u2502   \u2502   raise KeyError(key)"
            "                                       \u2502\n"
            "\u2514" + "\u2500" * 77 + "\u2518\n"
            "KeyError: 'llama'",
        ),
        ("https://github.com/bigcode-project/starcoder/issues/18", "KeyError: 'gpt_bigcode'"),
    ],
)
def test_config_mapping_keyerror_reported(url, text):
    diagnosis = errkb.explain(text, options=errkb.Options(probes=False))
    assert diagnosis.top.record.id == "transformers-config-mapping-keyerror-model-type"


def test_generation_config_invalid_strict():
    """Strict validation of a greedy config with a temperature is recognised."""
    import inspect

    from transformers import GenerationConfig

    if "strict" not in inspect.signature(GenerationConfig.validate).parameters:
        pytest.skip("this transformers has no GenerationConfig.validate(strict=...)")
    config = GenerationConfig(do_sample=False, temperature=0.5)

    with pytest.raises(ValueError) as info:
        config.validate(strict=True)
    top = top_match(info.value)
    assert "transformers-generation-config-invalid-strict" == top.record.id
    assert top.captures["flag"] == "temperature"


def test_greedy_num_return_sequences():
    """num_return_sequences > 1 with greedy decoding is recognised."""
    from transformers import GenerationConfig

    with pytest.raises(ValueError) as info:
        GenerationConfig(num_return_sequences=3).validate()
    top = top_match(info.value)
    assert "transformers-greedy-num-return-sequences" == top.record.id


def test_num_return_sequences_exceeds_num_beams():
    """More return sequences than beams is recognised, with both numbers captured."""
    from transformers import GenerationConfig

    with pytest.raises(ValueError) as info:
        GenerationConfig(num_beams=2, num_return_sequences=4).validate()
    top = top_match(info.value)
    assert "transformers-num-return-sequences-exceeds-num-beams" == top.record.id
    assert top.captures["num_return_sequences"] == 4
    assert top.captures["num_beams"] == 2


def test_flash_attention_not_installed():
    """Requesting flash_attention_2 without flash-attn installed is recognised."""
    if _installed("flash_attn"):
        pytest.skip("flash_attn is installed, the missing-package error cannot happen")
    from transformers import AutoModelForCausalLM

    with pytest.raises(ImportError) as info:
        AutoModelForCausalLM.from_config(_llama_config(), attn_implementation="flash_attention_2")
    top = top_match(info.value)
    assert "transformers-flash-attention-not-installed" == top.record.id


def test_sdpa_not_supported():
    """Forcing sdpa on an architecture without SDPA support (PegasusX) is recognised."""
    from transformers import AutoModel, PegasusXConfig

    config = PegasusXConfig(
        vocab_size=32,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=16,
        decoder_ffn_dim=16,
        max_position_embeddings=32,
    )

    with pytest.raises(ValueError) as info:
        AutoModel.from_config(config, attn_implementation="sdpa")
    top = top_match(info.value)
    assert "transformers-sdpa-not-supported" == top.record.id
    assert top.captures["model_class"] == "PegasusXModel"


def test_device_map_requires_accelerate(tmp_path, offline, monkeypatch):
    """from_pretrained(device_map='auto') without accelerate is recognised.

    accelerate is installed for the tests: transformers' own availability check is told it is
    not, and transformers' own code raises its message.
    """
    import transformers.integrations.accelerate as integration
    from transformers import LlamaForCausalLM

    monkeypatch.setattr(integration, "is_accelerate_available", lambda *a, **k: False)

    LlamaForCausalLM(_llama_config()).save_pretrained(tmp_path)

    with pytest.raises((ValueError, ImportError)) as info:
        LlamaForCausalLM.from_pretrained(str(tmp_path), device_map="auto")
    top = top_match(info.value)
    assert "transformers-device-map-requires-accelerate" == top.record.id


def test_bitsandbytes_quantization_requires_packages(tmp_path, offline):
    """4-bit bitsandbytes loading without accelerate/bitsandbytes is recognised."""
    if _installed("accelerate") and _installed("bitsandbytes"):
        pytest.skip("accelerate and bitsandbytes are both installed")
    from transformers import BitsAndBytesConfig, LlamaForCausalLM

    LlamaForCausalLM(_llama_config()).save_pretrained(tmp_path)

    with pytest.raises(ImportError) as info:
        LlamaForCausalLM.from_pretrained(
            str(tmp_path), quantization_config=BitsAndBytesConfig(load_in_4bit=True)
        )
    top = top_match(info.value)
    assert "transformers-bitsandbytes-quantization-requires-packages" == top.record.id
    assert top.captures["bits"] == 4


def test_hub_unreachable_not_cached(offline):
    """from_pretrained of an uncached repo id in offline mode is recognised."""
    from transformers import AutoConfig

    with pytest.raises(OSError) as info:
        AutoConfig.from_pretrained("someorg/definitely-not-cached-model", cache_dir=str(offline))
    top = top_match(info.value)
    assert "transformers-hub-unreachable-not-cached" == top.record.id


def test_not_a_valid_model_identifier(hub_stub):
    """A repo id the (local stand-in) Hub does not know is recognised."""
    from transformers import AutoConfig

    hub_stub.reply = (401, {"X-Error-Code": "RepoNotFound"})

    with pytest.raises(OSError) as info:
        AutoConfig.from_pretrained("someorg/nope", cache_dir=str(hub_stub.cache))
    top = top_match(info.value)
    assert "transformers-not-a-valid-model-identifier" == top.record.id
    assert top.captures["model_id"] == "someorg/nope"


def test_gated_repo_access(hub_stub):
    """A gated repo answer from the (local stand-in) Hub, wrapped by transformers, is recognised."""
    from transformers import AutoConfig

    hub_stub.reply = GATED_REPLY

    with pytest.raises(OSError) as info:
        AutoConfig.from_pretrained("someorg/gated", cache_dir=str(hub_stub.cache))
    top = top_match(info.value)
    assert "transformers-gated-repo-access" == top.record.id
    assert top.captures["repo_id"] == "someorg/gated"


# --------------------------------------------------------------------------------------------
# tokenizers
# --------------------------------------------------------------------------------------------


def test_tokenizers_untagged_enum_deserialization():
    """A tokenizer.json whose model section no variant accepts is recognised."""
    from tokenizers import Tokenizer

    data = json.loads(_word_level_tokenizer().to_str())
    del data["model"]["type"]
    data["model"]["vocab"] = 5

    with pytest.raises(Exception) as info:
        Tokenizer.from_str(json.dumps(data))
    top = top_match(info.value)
    assert "tokenizers-untagged-enum-deserialization" == top.record.id


def test_tokenizers_truncation_second_sequence_not_provided():
    """only_second truncation on a single sequence is recognised."""
    tok = _word_level_tokenizer()
    tok.enable_truncation(max_length=3, strategy="only_second")

    with pytest.raises(Exception) as info:
        tok.encode("a b c a")
    top = top_match(info.value)
    assert "tokenizers-truncation-second-sequence-not-provided" == top.record.id


def test_tokenizers_truncation_sequence_too_short():
    """only_first truncation that cannot reach max_length is recognised."""
    tok = _word_level_tokenizer()
    tok.enable_truncation(max_length=2, strategy="only_first")

    with pytest.raises(Exception) as info:
        tok.encode("a", "b c a b")
    top = top_match(info.value)
    assert "tokenizers-truncation-sequence-too-short" == top.record.id


# --------------------------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------------------------


_TRUNCATED_HEADER = b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'
_BROKEN_HEADER = b'{"w": {broken'


@pytest.mark.parametrize(
    ("content", "record_id"),
    [
        # An HTML page saved as .safetensors: its first bytes read as a huge header size.
        (b"<html><body>404 not found</body></html>" * 4, "safetensors-header-too-large"),
        # A file shorter than its header declares.
        (
            struct.pack("<Q", len(_TRUNCATED_HEADER)) + _TRUNCATED_HEADER + b"\0" * 8,
            "safetensors-metadata-incomplete-buffer",
        ),
        # A header that is not valid JSON.
        (
            struct.pack("<Q", len(_BROKEN_HEADER)) + _BROKEN_HEADER,
            "safetensors-invalid-header-deserialization",
        ),
    ],
    ids=["header-too-large", "incomplete-buffer", "invalid-header"],
)
def test_safetensors_bad_files_are_recognised(tmp_path, content, record_id):
    """Loading a damaged .safetensors file raises safetensors' own error, and it is recognised."""
    from safetensors.torch import load_file

    path = tmp_path / "model.safetensors"
    path.write_bytes(content)

    with pytest.raises(Exception) as info:
        load_file(str(path))
    top = top_match(info.value)
    assert record_id == top.record.id


def test_safetensors_shared_tensors_save(tmp_path):
    """save_file with two names for one tensor is refused and recognised."""
    import torch
    from safetensors.torch import save_file

    shared = torch.zeros(4)

    with pytest.raises(RuntimeError) as info:
        save_file({"a": shared, "b": shared}, str(tmp_path / "model.safetensors"))
    top = top_match(info.value)
    assert "safetensors-shared-tensors-save" == top.record.id


# --------------------------------------------------------------------------------------------
# huggingface_hub
# --------------------------------------------------------------------------------------------


def test_hub_offline_mode_is_enabled(offline):
    """An API call in offline mode raises OfflineModeIsEnabled, which is recognised."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import OfflineModeIsEnabled

    with pytest.raises(OfflineModeIsEnabled) as info:
        HfApi().model_info("someorg/some-model")
    top = top_match(info.value)
    assert "huggingface-hub-offline-mode-is-enabled" == top.record.id


def test_hub_local_entry_not_found_connection(offline):
    """hf_hub_download of an uncached file in offline mode is recognised."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    with pytest.raises(LocalEntryNotFoundError) as info:
        hf_hub_download("someorg/some-model", "config.json", cache_dir=str(offline))
    top = top_match(info.value)
    assert "huggingface-hub-local-entry-not-found-connection" == top.record.id


def test_hub_local_files_only_cache_miss(tmp_path):
    """local_files_only=True for an uncached file is recognised."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    with pytest.raises(LocalEntryNotFoundError) as info:
        hf_hub_download(
            "someorg/some-model", "config.json", cache_dir=str(tmp_path), local_files_only=True
        )
    top = top_match(info.value)
    assert "huggingface-hub-local-files-only-cache-miss" == top.record.id


def test_hub_repository_not_found(hub_stub):
    """A RepoNotFound answer from the (local stand-in) Hub is recognised."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import RepositoryNotFoundError

    hub_stub.reply = (401, {"X-Error-Code": "RepoNotFound"})

    with pytest.raises(RepositoryNotFoundError) as info:
        hf_hub_download("someorg/nope", "config.json", cache_dir=str(hub_stub.cache))
    top = top_match(info.value)
    assert "huggingface-hub-repository-not-found" == top.record.id
    assert top.captures["status"] == 401


def test_hub_gated_repo(hub_stub):
    """A GatedRepo answer from the (local stand-in) Hub is recognised."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import GatedRepoError

    hub_stub.reply = GATED_REPLY

    with pytest.raises(GatedRepoError) as info:
        hf_hub_download("someorg/gated", "config.json", cache_dir=str(hub_stub.cache))
    top = top_match(info.value)
    assert "huggingface-hub-gated-repo" == top.record.id


def test_hub_download_shorter_than_announced(hub_stub):
    """A download that ends before the size the Hub announced is recognised, with both sizes."""
    from huggingface_hub import hf_hub_download

    hub_stub.reply = (
        200,
        {
            "X-Repo-Commit": "a" * 40,
            "ETag": '"0123abcd"',
            "X-Linked-Etag": '"0123abcd"',
            "X-Linked-Size": "1000",
        },
    )
    hub_stub.body = b"version https://git-lfs.github.com/spec/v1\n"

    with pytest.raises(OSError) as info:
        hf_hub_download("someorg/model", "tokenizer.model", cache_dir=str(hub_stub.cache))
    top = top_match(info.value)
    assert "huggingface-hub-download-consistency-check-failed" == top.record.id
    assert (top.captures["expected_size"], top.captures["actual_size"]) == (1000, 43)


def test_hub_unauthorized_invalid_token(hub_stub):
    """A 401 for invalid credentials from the (local stand-in) Hub is recognised."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError

    hub_stub.reply = (401, {"X-Error-Message": "Invalid credentials in Authorization header"})

    with pytest.raises(HfHubHTTPError) as info:
        hf_hub_download(
            "someorg/some-model", "config.json", cache_dir=str(hub_stub.cache), token="hf_invalid"
        )
    top = top_match(info.value)
    assert "huggingface-hub-unauthorized-invalid-token" == top.record.id


# --------------------------------------------------------------------------------------------
# accelerate (optional dependency: skipped where it is not installed)
# --------------------------------------------------------------------------------------------


def _fake_quantized(device_map):
    import torch

    model = torch.nn.Linear(2, 2)
    model.is_loaded_in_8bit = True
    model.hf_device_map = device_map
    return model


def test_accelerate_quantized_model_cpu_disk_offload():
    """prepare() on an 8-bit model with a disk-offloaded part is refused and recognised."""
    accelerate = pytest.importorskip("accelerate")
    if _installed("bitsandbytes"):
        pytest.skip("a multi-backend bitsandbytes may allow CPU training")
    accelerator = accelerate.Accelerator(cpu=True)

    with pytest.raises(ValueError) as info:
        accelerator.prepare(_fake_quantized({"a": 0, "b": "disk"}))
    top = top_match(info.value)
    assert "accelerate-quantized-model-cpu-disk-offload" == top.record.id


def test_accelerate_quantized_model_wrong_device():
    """prepare() on an 8-bit model placed on another device than the process's is recognised."""
    accelerate = pytest.importorskip("accelerate")
    if _installed("bitsandbytes"):
        pytest.skip("a multi-backend bitsandbytes skips the device check on CPU")
    accelerator = accelerate.Accelerator(cpu=True)

    with pytest.raises(ValueError) as info:
        accelerator.prepare(_fake_quantized({"": "cuda:1"}))
    top = top_match(info.value)
    assert "accelerate-quantized-model-wrong-device" == top.record.id
