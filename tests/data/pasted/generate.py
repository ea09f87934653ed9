"""Regenerate the corpus of pasted error texts: real tools, real raising programs, their output.

Run from the repository root with the test venv (offline; about a minute)::

    PYTHONPATH=. .nox/tests/bin/python tests/data/pasted/generate.py

Each case writes small programs (and a stand-in ``vllm`` package whose modules carry vLLM's
file and function names, so frames look like a vLLM user's) into a scratch folder, runs them in
child interpreters under the tool that prints the error (rich, IPython, pytest, torchrun, Python
``logging``), and saves what the tool printed, byte for byte. Where a paste also passed through
something that cannot run here (GitHub's quote reply, a terminal copy, a terminal that shows ESC
as ``^[``, rsyslog, Ray's driver, Windows), that step is one named function below, applied to
real output, and the manifest's ``tool`` field says so.

``manifest.json`` lists every file with its shape, the record ``errkb explain`` must find as top
match, the tool, and ``found_today``: the top match of ``errkb explain --json --no-probes -``
on the file when it was generated, by errkb as committed at HEAD. The clock of the logging cases and the process ids in log
prefixes are fixed, so that regenerating changes only what the tools themselves vary
(pytest's and torchrun's timings, torchrun's pids, object addresses in rich's locals). Never
edit the generated files by hand.
"""

from __future__ import annotations

import calendar
import dataclasses
import importlib.metadata
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SCRATCH = Path(tempfile.gettempdir()) / "errkb-pasted"
SITE = SCRATCH / "site-packages"
PROJ = SCRATCH / "proj"
VENV_SITE = Path(importlib.metadata.distribution("torch").locate_file(""))

#: 2026-11-30 14:02:11.123 UTC: the clock of every logging case.
CLOCK = calendar.timegm((2026, 11, 30, 14, 2, 11)) + 0.123
ENGINE_PID = 123
RAY_PID = 4567
SYSLOG_HOST = "gpu-node-1"

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def version(dist: str) -> str:
    return importlib.metadata.version(dist)


PYTHON = f"CPython {platform.python_version()}"
RICH = f"rich {version('rich')}"
IPYTHON = f"IPython {version('ipython')}"
PYTEST = f"pytest {version('pytest')}"
TORCH = f"torch {version('torch')}"
TRANSFORMERS = f"transformers {version('transformers')}"
HUB = f"huggingface_hub {version('huggingface_hub')}"
STANDIN = "stand-in vllm 0.10.2 modules raising"


def record_example(path: str, index: int) -> str:
    """An example message of a record, so corpus and record cannot drift apart."""
    data = json.loads((REPO / "records" / path).read_text(encoding="utf-8"))
    return str(data["examples"][index])


OOM_MESSAGE = record_example("torch/cuda-out-of-memory.json", 4)

# --------------------------------------------------------------------------------------------
# The stand-in vllm package: vLLM's module, class and function names, and its messages; the
# bodies are reduced to the calls that lead to the raise. Written fresh for each run.

VLLM_SOURCES = {
    "vllm/__init__.py": """
        from vllm.entrypoints.llm import LLM

        __version__ = "0.10.2"
        __all__ = ["LLM"]
    """,
    "vllm/_clock.py": '''
        """A fixed clock for log records, so that regenerated logs are stable."""
        import logging
        import os
        import time

        _factory = logging.getLogRecordFactory()


        def _record(*args, **kwargs):
            record = _factory(*args, **kwargs)
            record.created = float(os.environ["PASTED_CLOCK"])
            record.msecs = round(record.created % 1 * 1000)
            return record


        def freeze():
            if "PASTED_CLOCK" in os.environ:
                logging.setLogRecordFactory(_record)
                logging.Formatter.converter = time.gmtime
    ''',
    "vllm/logger.py": '''
        """Logging set up as vllm/logger.py does: its format, date format and line prefixing."""
        import logging
        import os
        import sys

        from vllm._clock import freeze

        _FORMAT = "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"
        _DATE_FORMAT = "%m-%d %H:%M:%S"
        _GREY = "\\033[90m"
        _RESET = "\\033[0m"
        _LEVEL_COLOURS = {
            "DEBUG": "\\033[37m",
            "INFO": "\\033[32m",
            "WARNING": "\\033[33m",
            "ERROR": "\\033[31m",
            "CRITICAL": "\\033[35m",
        }


        class NewLineFormatter(logging.Formatter):
            """Repeats a record's prefix after each of its newlines (a traceback too), CRLF."""

            def format(self, record):
                text = super().format(record)
                if record.message:
                    head = text.partition(record.message)[0]
                    text = text.replace("\\n", "\\r\\n" + head)
                return text


        class ColoredFormatter(NewLineFormatter):
            """Grey time and [file:line], a coloured level name."""

            def __init__(self, fmt, datefmt=None):
                fmt = fmt.replace("%(asctime)s", _GREY + "%(asctime)s" + _RESET)
                fmt = fmt.replace(
                    "[%(filename)s:%(lineno)d]", _GREY + "[%(filename)s:%(lineno)d]" + _RESET
                )
                super().__init__(fmt, datefmt)

            def format(self, record):
                plain = record.levelname
                record.levelname = _LEVEL_COLOURS.get(plain, "") + plain + _RESET
                try:
                    return super().format(record)
                finally:
                    record.levelname = plain


        def _configure():
            freeze()
            coloured = os.environ.get("VLLM_LOGGING_COLOR") == "1"
            formatter = (ColoredFormatter if coloured else NewLineFormatter)(
                _FORMAT, datefmt=_DATE_FORMAT
            )
            handler = logging.StreamHandler(sys.stdout)
            handler.setFormatter(formatter)
            root = logging.getLogger("vllm")
            root.addHandler(handler)
            root.setLevel(logging.DEBUG)
            root.propagate = False


        _configure()


        def init_logger(name):
            return logging.getLogger(name)
    ''',
    "vllm/utils.py": '''
        """decorate_logs: every line a process writes starts with "(name pid=N) "."""
        import os
        import sys

        _CYAN = "\\033[1;36m"
        _RESET = "\\033[0;0m"


        def _prefix_lines(stream, prefix):
            write = stream.write
            at_line_start = True

            def write_with_prefix(text):
                nonlocal at_line_start
                for piece in text.splitlines(keepends=True):
                    if at_line_start:
                        write(prefix)
                    write(piece)
                    at_line_start = piece.endswith("\\n")
                return len(text)

            stream.write = write_with_prefix


        def decorate_logs(process_name, pid):
            label = f"({process_name} pid={pid})"
            if os.environ.get("VLLM_LOGGING_COLOR") == "1":
                label = _CYAN + label + _RESET
            _prefix_lines(sys.stdout, label + " ")
            _prefix_lines(sys.stderr, label + " ")
    ''',
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/llm.py": """
        import os


        class LLM:
            def __init__(self, model, *, gpu_memory_utilization=0.9, max_model_len=None, **kwargs):
                engine_args = dict(
                    model=model,
                    gpu_memory_utilization=gpu_memory_utilization,
                    max_model_len=max_model_len,
                    **kwargs,
                )
                if os.environ.get("VLLM_USE_V1", "1") == "0":
                    from vllm.engine.llm_engine import LLMEngine
                else:
                    from vllm.v1.engine.llm_engine import LLMEngine
                self.llm_engine = LLMEngine.from_engine_args(**engine_args)
    """,
    "vllm/engine/__init__.py": "",
    "vllm/engine/llm_engine.py": """
        from vllm.logger import init_logger
        from vllm.worker.worker import Worker

        logger = init_logger(__name__)


        class LLMEngine:
            def __init__(self, model, gpu_memory_utilization, max_model_len, block_size=16):
                logger.info(
                    "Initializing a V0 LLM engine (v0.10.2) with config: model=%r, "
                    "gpu_memory_utilization=%s", model, gpu_memory_utilization
                )
                # Not given: vLLM takes max_position_embeddings from config.json.
                self.max_model_len = max_model_len or 32768
                self.worker = Worker(block_size=block_size)
                self._initialize_kv_caches()

            @classmethod
            def from_engine_args(cls, **engine_args):
                return cls(**engine_args)

            def _initialize_kv_caches(self):
                num_gpu_blocks, num_cpu_blocks = self.worker.determine_num_available_blocks()
                logger.info("# GPU blocks: %d, # CPU blocks: %d", num_gpu_blocks, num_cpu_blocks)
                self.worker.initialize_cache(num_gpu_blocks, num_cpu_blocks, self.max_model_len)
    """,
    "vllm/worker/__init__.py": "",
    "vllm/worker/worker.py": """
        class Worker:
            def __init__(self, block_size):
                self.block_size = block_size

            def determine_num_available_blocks(self):
                # What profiling leaves on a 24 GiB card at gpu_memory_utilization=0.6.
                return 1334, 2048

            def initialize_cache(self, num_gpu_blocks, num_cpu_blocks, max_model_len):
                raise_if_cache_size_invalid(num_gpu_blocks, self.block_size, max_model_len)


        def raise_if_cache_size_invalid(num_gpu_blocks, block_size, max_model_len):
            if num_gpu_blocks <= 0:
                raise ValueError("No available memory for the cache blocks. "
                                 "Try increasing `gpu_memory_utilization` when "
                                 "initializing the engine.")
            max_seq_len = block_size * num_gpu_blocks
            if max_model_len > max_seq_len:
                raise ValueError(
                    f"The model's max seq len ({max_model_len}) "
                    "is larger than the maximum number of tokens that can be "
                    f"stored in KV cache ({max_seq_len}). Try increasing "
                    "`gpu_memory_utilization` or decreasing `max_model_len` when "
                    "initializing the engine.")
    """,
    "vllm/worker/worker_base.py": """
        from vllm.logger import init_logger
        from vllm.worker.worker import Worker

        logger = init_logger(__name__)


        class WorkerWrapperBase:
            def __init__(self, block_size=16):
                self.worker = Worker(block_size=block_size)

            def execute_method(self, method, *args, **kwargs):
                try:
                    return getattr(self.worker, method)(*args, **kwargs)
                except Exception as e:
                    msg = (f"Error executing method {method!r}. "
                           "This might cause deadlock in distributed execution.")
                    logger.exception(msg)
                    raise e
    """,
    "vllm/v1/__init__.py": "",
    "vllm/v1/core/__init__.py": "",
    "vllm/v1/core/kv_cache_utils.py": """
        def check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory):
            if not kv_cache_spec:
                return
            if available_memory <= 0:
                raise ValueError("No available memory for the cache blocks. "
                                 "Try increasing `gpu_memory_utilization` when "
                                 "initializing the engine.")


        def get_kv_cache_config(vllm_config, kv_cache_spec, available_memory):
            check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)
            return {"num_blocks": available_memory // 2**21}
    """,
    "vllm/v1/engine/__init__.py": "",
    "vllm/v1/engine/core.py": """
        import signal

        from vllm.logger import init_logger
        from vllm.utils import decorate_logs
        from vllm.v1.core.kv_cache_utils import get_kv_cache_config
        from vllm.v1.worker.gpu_worker import Worker

        logger = init_logger(__name__)


        class EngineCore:
            def __init__(self, vllm_config):
                logger.info("Initializing a V1 LLM engine (v0.10.2) with config: model=%r",
                            vllm_config["model"])
                self.worker = Worker(vllm_config)
                self._initialize_kv_caches(vllm_config)

            def _initialize_kv_caches(self, vllm_config):
                kv_cache_spec = self.worker.get_kv_cache_spec()
                available_gpu_memory = self.worker.determine_available_memory()
                return get_kv_cache_config(vllm_config, kv_cache_spec, available_gpu_memory)


        class EngineCoreProc(EngineCore):
            def __init__(self, vllm_config, dp_rank=0):
                super().__init__(vllm_config)

            @staticmethod
            def run_engine_core(*args, dp_rank=0, pid, **kwargs):
                decorate_logs(f"EngineCore_{dp_rank}", pid)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                engine_core = None
                try:
                    engine_core = EngineCoreProc(*args, dp_rank=dp_rank, **kwargs)
                    engine_core.run_busy_loop()
                except SystemExit:
                    logger.debug("EngineCore exiting.")
                    raise
                except Exception as e:
                    if engine_core is None:
                        logger.exception("EngineCore failed to start.")
                    else:
                        logger.exception("EngineCore encountered a fatal error.")
                    raise e
    """,
    "vllm/v1/worker/__init__.py": "",
    "vllm/v1/worker/gpu_worker.py": """
        from vllm.logger import init_logger

        logger = init_logger(__name__)
        GiB = 2**30


        class Worker:
            def __init__(self, vllm_config):
                self.gpu_memory_utilization = vllm_config["gpu_memory_utilization"]

            def get_kv_cache_spec(self):
                return {"model.layers.0.self_attn.attn": "FullAttentionSpec(block_size=16)"}

            def determine_available_memory(self):
                # 23.57 GiB card: 0.5 of it minus 14.99 GiB of weights and 0.33 GiB of peak.
                available = int(23.57 * GiB * self.gpu_memory_utilization - 15.32 * GiB)
                logger.info("Available KV cache memory: %.2f GiB", available / GiB)
                return available
    """,
    "vllm/v1/engine/utils.py": """
        import multiprocessing


        class CoreEngineProcManager:
            def __init__(self, target_fn, vllm_config, pid):
                context = multiprocessing.get_context("fork")
                self.processes = [
                    context.Process(
                        target=target_fn,
                        name="EngineCore_0",
                        kwargs={"vllm_config": vllm_config, "dp_rank": 0, "pid": pid},
                    )
                ]
                for proc in self.processes:
                    proc.start()


        def wait_for_engine_startup(processes):
            for proc in processes:
                proc.join()
            finished = {proc.name: proc.exitcode for proc in processes if proc.exitcode}
            if finished:
                raise RuntimeError("Engine core initialization failed. "
                                   "See root cause above. "
                                   f"Failed core proc(s): {finished}")
    """,
    "vllm/v1/engine/core_client.py": """
        import os

        from vllm.v1.engine.core import EngineCoreProc
        from vllm.v1.engine.utils import CoreEngineProcManager, wait_for_engine_startup


        class EngineCoreClient:
            @staticmethod
            def make_client(vllm_config):
                return SyncMPClient(vllm_config)


        class MPClient(EngineCoreClient):
            def __init__(self, vllm_config):
                pid = int(os.environ.get("PASTED_ENGINE_PID", os.getpid()))
                self.engine_manager = CoreEngineProcManager(
                    EngineCoreProc.run_engine_core, vllm_config, pid
                )
                wait_for_engine_startup(self.engine_manager.processes)


        class SyncMPClient(MPClient):
            pass
    """,
    "vllm/v1/engine/llm_engine.py": """
        from vllm.logger import init_logger
        from vllm.v1.engine.core_client import EngineCoreClient

        logger = init_logger(__name__)


        class LLMEngine:
            def __init__(self, vllm_config):
                self.engine_core = EngineCoreClient.make_client(vllm_config)

            @classmethod
            def from_engine_args(cls, **engine_args):
                logger.info("Using max model len %d", engine_args.get("max_model_len") or 32768)
                return cls(engine_args)
    """,
}

# Programs a user would run. {model} and {oom} are filled in.
PROGRAMS = {
    "serve.py": """
        from vllm import LLM

        llm = LLM(model="{model}", gpu_memory_utilization=0.6)
        print(llm.generate("Hello"))
    """,
    "serve_rich.py": """
        import sys

        from rich.console import Console
        from rich.traceback import install

        width, colour = int(sys.argv[1]), sys.argv[2] == "color"
        if colour:
            console = Console(stderr=True, force_terminal=True, color_system="truecolor")
        else:
            console = Console(stderr=True, color_system=None)
        install(console=console, width=width, show_locals="--locals" in sys.argv)

        from vllm import LLM

        llm = LLM(model="{model}", gpu_memory_utilization=0.6)
    """,
    "train_rich.py": """
        import sys

        from rich.console import Console
        from rich.traceback import install

        install(console=Console(stderr=True, color_system=None), width=int(sys.argv[1]))

        import train

        train.main()
    """,
    "train.py": """
        import torch


        def main():
            model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(256, 10))
            batch = torch.zeros(2, 512)
            logits = model(batch)
            return logits


        if __name__ == "__main__":
            main()
    """,
    "kv_cache.py": """
        import torch

        OOM = {oom!r}


        def allocate_kv_cache(num_blocks, block_bytes):
            # Stands in for torch.empty(..., device="cuda") on a full GPU: same class, same text.
            raise torch.OutOfMemoryError(OOM)


        def load_model():
            return allocate_kv_cache(num_blocks=4096, block_bytes=2 * 2**20)
    """,
    "load_config.py": """
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained("checkpoints/my-model")
    """,
    "serve_v1.py": """
        from vllm import LLM

        llm = LLM(model="Qwen/Qwen2.5-7B-Instruct", gpu_memory_utilization=0.5)
    """,
    "ray_worker.py": """
        from vllm.worker.worker_base import WorkerWrapperBase

        wrapper = WorkerWrapperBase(block_size=16)
        try:
            wrapper.execute_method("initialize_cache", 1334, 2048, 32768)
        except ValueError:
            pass  # Ray sends it to the driver, which raises it there as a RayTaskError
    """,
    "plain_log.py": """
        import logging

        from vllm._clock import freeze

        freeze()
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            level=logging.INFO)
        log = logging.getLogger("app.loader")


        def main():
            from transformers import AutoConfig

            log.info("Loading config from %s", "checkpoints/my-model")
            try:
                AutoConfig.from_pretrained("checkpoints/my-model")
            except Exception:
                log.exception("Could not load the model config")
                log.info("Falling back to the CPU baseline")


        main()
    """,
    "server_log.py": """
        import logging
        import sys
        import traceback

        from vllm._clock import freeze

        freeze()


        class LevelPrefix(logging.Formatter):
            # uvicorn's default look: "INFO:" padded to ten columns, then the message.
            def format(self, record):
                return f"{record.levelname + ':':<10}{super().format(record)}"


        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(LevelPrefix("%(message)s"))
        log = logging.getLogger("uvicorn")
        log.addHandler(handler)
        log.setLevel(logging.INFO)

        log.info("Started server process [123]")
        log.info("Waiting for application startup.")
        try:
            from vllm import LLM

            llm = LLM(model="{model}", gpu_memory_utilization=0.6)
        except Exception:
            log.error("Traceback of the failed startup:")
            traceback.print_exc()
            log.error("Application startup failed. Exiting.")
        log.info("Shutting down")
        log.info("Waiting for application shutdown.")
        log.info("Application shutdown complete.")
        log.info("Finished server process [123]")
    """,
    "windows_paths.py": '''
        """Format a real traceback as Windows would show it: each frame's file moved to C:."""
        import json
        import runpy
        import sys
        import traceback

        mapping = json.loads(sys.argv[2])


        def windows(path):
            for posix, drive in mapping:
                if path.startswith(posix):
                    return drive + path[len(posix):].replace("/", "\\\\")
            return path


        def rewrite(exc, seen):
            if exc is None or id(exc) in seen:
                return
            seen.add(id(exc))
            for frame in exc.stack:
                frame.line  # read the source line while the file can still be found
                frame.filename = windows(frame.filename)
            rewrite(exc.__cause__, seen)
            rewrite(exc.__context__, seen)


        try:
            runpy.run_path(sys.argv[1], run_name="__main__")
        except Exception as error:
            # Drop this script's own frames: the user ran the program directly.
            tb = error.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != sys.argv[1]:
                tb = tb.tb_next
            exc = traceback.TracebackException(type(error), error, tb)
            rewrite(exc, set())
            sys.stderr.write("".join(exc.format()))
            sys.exit(1)
    ''',
    "test_engine.py": """
        from vllm import LLM


        def load_engine(max_model_len=None):
            return LLM(model="{model}", gpu_memory_utilization=0.6, max_model_len=max_model_len)


        def test_engine_starts():
            llm = load_engine()
            assert llm.llm_engine is not None
    """,
    "test_model.py": """
        import torch


        def test_forward_shape():
            model = torch.nn.Linear(256, 10)
            batch = torch.zeros(2, 512)
            assert model(batch).shape == (2, 10)
    """,
}

IPYTHON_OOM_CELL = """\
from kv_cache import load_model

cache = load_model()
"""

IPYTHON_HUB_CELL = f"""\
from huggingface_hub import hf_hub_download

path = hf_hub_download("{MODEL}", "config.json")
"""

IPYTHON_MODEL_TYPE_CELL = """\
from transformers import AutoConfig

config = AutoConfig.from_pretrained("checkpoints/new-arch")
"""

IPYTHON_SHELL = """\
import sys

from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance(colors=sys.argv[1])
shell.execution_count = int(sys.argv[2])
shell.run_cell(sys.stdin.read(), store_history=True)
"""

IPYTHON_ENGINE_CELL = f"""\
from vllm import LLM

llm = LLM(model="{MODEL}", gpu_memory_utilization=0.6)
"""


# --------------------------------------------------------------------------------------------
# Running the tools


def write_tree() -> None:
    """The scratch folder: the stand-in vllm package, the programs, the model folders."""
    shutil.rmtree(SCRATCH, ignore_errors=True)
    for name, source in VLLM_SOURCES.items():
        path = SITE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    for name, source in PROGRAMS.items():
        text = textwrap.dedent(source).lstrip()
        text = text.replace("{model}", MODEL).replace("{oom!r}", repr(OOM_MESSAGE))
        (PROJ / name).parent.mkdir(parents=True, exist_ok=True)
        (PROJ / name).write_text(text, encoding="utf-8")
    # An empty model folder (no config.json inside) and one of an architecture unknown to
    # transformers: both make transformers raise by itself, without the network.
    (PROJ / "checkpoints" / "my-model").mkdir(parents=True)
    (PROJ / "checkpoints" / "new-arch").mkdir(parents=True)
    (PROJ / "checkpoints" / "new-arch" / "config.json").write_text(
        json.dumps({"model_type": "llama5", "architectures": ["Llama5ForCausalLM"]}),
        encoding="utf-8",
    )
    (SCRATCH / "hf-home").mkdir()
    (SCRATCH / "ipython").mkdir()


#: Variables of the calling shell that would change how the tools print.
_DROPPED = (
    "FORCE_COLOR",
    "NO_COLOR",
    "PY_COLORS",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "COLUMNS",
    "LINES",
    "PYTEST_ADDOPTS",
    "PYTHONSTARTUP",
    "PYTHONWARNINGS",
    "VLLM_USE_V1",
    "VLLM_LOGGING_COLOR",
)


def child_env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _DROPPED and not key.startswith(("ERRKB_", "PASTED_"))
    }
    env.update(
        # errkb stays out of the programs: this corpus is what users see without it.
        ERRKB_AUTOINSTALL="0",
        ERRKB_DISABLE="1",
        PYTHONPATH=os.pathsep.join([str(SITE), str(PROJ)]),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
        HF_HUB_OFFLINE="1",
        HF_HOME=str(SCRATCH / "hf-home"),
        IPYTHONDIR=str(SCRATCH / "ipython"),
        TERM="xterm-256color",
        TZ="UTC",
        COLUMNS="120",
        LINES="40",
        PASTED_CLOCK=repr(CLOCK),
        PASTED_ENGINE_PID=str(ENGINE_PID),
    )
    env.update(extra)
    return env


def run(
    args: list[str],
    *,
    stdin: str = "",
    env: dict[str, str] | None = None,
    expect_failure: bool = True,
) -> str:
    """Run a child in the project folder; what it printed, stdout and stderr merged in order."""
    result = subprocess.run(
        args,
        cwd=PROJ,
        input=stdin.encode(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env or child_env(),
        timeout=300,
        check=False,
    )
    if expect_failure and result.returncode == 0:
        raise RuntimeError(f"{args}: expected the program to fail, it exited 0")
    if not expect_failure and result.returncode != 0:
        raise RuntimeError(f"{args}: exited {result.returncode}:\n{result.stdout.decode()}")
    return result.stdout.decode()


def python(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, expect_failure: bool = True
) -> str:
    return run([sys.executable, *args], stdin=stdin, env=env, expect_failure=expect_failure)


def ipython(cell: str, colors: str, *extra: str) -> str:
    return python("-m", "IPython", f"--colors={colors}", *extra, "-c", cell)


def ipython_shell(cell: str, colors: str, count: int, env: dict[str, str] | None = None) -> str:
    """A cell run by an InteractiveShell (what a notebook kernel uses) at a given In[count]."""
    return python(
        "-c", IPYTHON_SHELL, colors, str(count), stdin=cell, env=env, expect_failure=False
    )


def pytest(test_file: str, *options: str, env: dict[str, str] | None = None) -> str:
    return python(
        "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:errkb", *options, test_file, env=env
    )


# --------------------------------------------------------------------------------------------
# What a paste passes through after the tool printed it. Each is named in the manifest.


def terminal_copy(text: str) -> str:
    """What copying from a terminal gives: a CR before LF moved the cursor, it is not text."""
    return text.replace("\r\n", "\n")


def caret_escapes(text: str) -> str:
    """ESC shown as the two characters ``^[`` (cat -v, less without -R, some web consoles)."""
    return text.replace("\x1b", "^[")


def syslog(text: str, tag: str) -> str:
    """Each line as rsyslog writes a journald line to /var/log/syslog: control characters
    escaped as ``#`` and three octal digits (ESC -> ``#033``, CR -> ``#015``)."""
    stamp = "Nov 30 14:02:11"
    out = []
    for line in text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"):
        escaped = "".join(f"#{ord(ch):03o}" if ord(ch) < 32 and ch != "\t" else ch for ch in line)
        out.append(f"{stamp} {SYSLOG_HOST} {tag}: {escaped}\n")
    return "".join(out)


def ray_driver(text: str, actor: str, pid: int, ip: str | None, colour: bool) -> str:
    """Worker output as Ray's driver prints it: ``(Actor pid=N[, ip=...]) `` before each line,
    dim cyan when colour is on (ray/_private/worker.py print_worker_logs)."""
    label = f"({actor} pid={pid}" + (f", ip={ip})" if ip else ")")
    if colour:
        label = "\x1b[2m\x1b[36m" + label + "\x1b[0m"
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "".join(f"{label} {line}\n" for line in lines)


def github_quote_reply(before: str, quoted: str, after: str, *, fenced: bool) -> str:
    """A reply made with GitHub's "Quote reply" (github/quote-selection insertQuote): the
    selection trimmed, ``> `` before each line, after the text already typed, then the reply.
    With markdown quoting on, a code block comes back fenced."""
    selection = quoted.strip()
    if fenced:
        selection = "```\n" + selection + "\n```"
    quote = "> " + selection.replace("\n", "\n> ") + "\n\n"
    return f"{before}\n\n{quote}{after}\n"


def first_sentences(message: str, count: int) -> str:
    """The start of a message as people cut it when they paste only "the error"."""
    parts = message.split(". ")
    return ". ".join(parts[:count]) + "."


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1] + "\n"


# --------------------------------------------------------------------------------------------
# The corpus


# The records each file must lead to.
KV = "vllm-kv-cache-max-seq-len"
NO_BLOCKS = "vllm-no-cache-blocks"
OOM = "torch-cuda-out-of-memory"
MAT = "torch-mat1-mat2-shapes-cannot-be-multiplied"
NO_MODEL_TYPE = "transformers-config-missing-model-type"
UNKNOWN_TYPE = "transformers-model-type-not-recognized"
LOCAL_ENTRY = "huggingface-hub-local-entry-not-found-connection"


@dataclasses.dataclass
class Entry:
    file: str
    shape: str
    record: str
    tool: str
    text: str
    note: str | None = None
    found_today: str | None = None


class Corpus:
    """The entries made so far; later shapes reuse earlier output (``text``)."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def add(
        self, file: str, shape: str, record: str, tool: str, text: str, note: str | None = None
    ) -> None:
        if record.startswith("vllm-"):
            tool += f"; {STANDIN}"
        self.entries.append(Entry(file, shape, record, tool, text, note))

    def text(self, file: str) -> str:
        return next(entry.text for entry in self.entries if entry.file == file)


def v0_env() -> dict[str, str]:
    """vLLM's original engine (VLLM_USE_V1=0), whose worker raises the KV-cache error."""
    return child_env(VLLM_USE_V1="0")


def rich_tracebacks(corpus: Corpus) -> None:
    """rich.traceback.install at two widths, with and without colour, with locals."""
    # The panel takes install's width; the message line takes the
    # console's (the terminal's) width: a 120-column terminal, and a 60-column pane.
    for width, columns in ((100, 120), (60, 60)):
        for colour in ("color", "plain"):
            text = python(
                "serve_rich.py",
                str(width),
                colour,
                env=child_env(VLLM_USE_V1="0", COLUMNS=str(columns)),
            )
            how = "truecolor, force_terminal" if colour == "color" else "color_system=None"
            corpus.add(
                f"rich-kv-cache-w{width}-{colour}.txt",
                "rich-traceback",
                KV,
                f"{RICH} (traceback.install(width={width}), {how}, COLUMNS={columns}), stderr",
                text,
            )
    corpus.add(
        "rich-kv-cache-locals-plain.txt",
        "rich-traceback",
        KV,
        f"{RICH} (traceback.install(width=100, show_locals=True), color_system=None), stderr",
        python("serve_rich.py", "100", "plain", "--locals", env=v0_env()),
    )
    corpus.add(
        "rich-linear-w100-plain.txt",
        "rich-traceback",
        MAT,
        f"{RICH} (traceback.install(width=100), color_system=None), {TORCH} raising",
        python("train_rich.py", "100"),
    )


def ipython_tracebacks(corpus: Corpus) -> None:
    """IPython's own tracebacks: Cell In[n], ----> arrows, chains, colour themes."""
    oom_plain = ipython(IPYTHON_OOM_CELL, "nocolor")
    for colors, text in (
        ("nocolor", oom_plain),
        ("linux", ipython(IPYTHON_OOM_CELL, "linux")),
        ("neutral", ipython(IPYTHON_OOM_CELL, "neutral")),
    ):
        corpus.add(
            f"ipython-oom-{colors}.txt",
            "ipython",
            OOM,
            f"{IPYTHON} (python -m IPython --colors={colors} -c), real torch.OutOfMemoryError class",
            text,
            "IPython names the class OutOfMemoryError, without torch.",
        )
    for colors in ("nocolor", "linux"):
        corpus.add(
            f"ipython-cell5-kv-cache-{colors}.txt",
            "ipython",
            KV,
            f"{IPYTHON} (InteractiveShell(colors={colors!r}).run_cell at In[5])",
            ipython_shell(IPYTHON_ENGINE_CELL, colors, 5, env=v0_env()),
        )
    for colors in ("nocolor", "linux"):
        corpus.add(
            f"ipython-chained-model-type-{colors}.txt",
            "ipython",
            UNKNOWN_TYPE,
            f"{IPYTHON} (python -m IPython --colors={colors} -c), {TRANSFORMERS} raising",
            ipython(IPYTHON_MODEL_TYPE_CELL, colors),
            "KeyError, then 'During handling of the above exception' and the ValueError, "
            "whose message has a blank line in it.",
        )
    hub_plain = ipython(IPYTHON_HUB_CELL, "nocolor")
    corpus.add(
        "ipython-hub-offline-nocolor.txt",
        "ipython",
        # The chain's root cause: OfflineModeIsEnabled, which LocalEntryNotFoundError reports.
        "huggingface-hub-offline-mode-is-enabled",
        f"{IPYTHON} (python -m IPython --colors=nocolor -c), {HUB} raising (HF_HUB_OFFLINE=1)",
        hub_plain,
        "IPython prints LocalEntryNotFoundError, Python huggingface_hub.errors.LocalEntryNotFoundError. "
        "The root cause, printed first, is OfflineModeIsEnabled: its record is the diagnosis.",
    )


def pytest_runs(corpus: Corpus) -> None:
    """pytest's report: E lines, > markers, and the short summary line that cuts the message."""
    for colour in ("no", "yes"):
        corpus.add(
            f"pytest-kv-cache-color-{colour}.txt",
            "pytest",
            KV,
            f"{PYTEST} (-p no:cacheprovider --color={colour}), stdout",
            pytest("test_engine.py", f"--color={colour}", env=v0_env()),
            "The short test summary line cuts the message at the terminal width (COLUMNS=120).",
        )
    for style in ("long", "short", "line", "native"):
        corpus.add(
            f"pytest-linear-tb-{style}.txt",
            "pytest",
            MAT,
            f"{PYTEST} (-p no:cacheprovider --color=no --tb={style}), {TORCH} raising",
            pytest("test_model.py", "--color=no", f"--tb={style}"),
        )


def github_quotes(corpus: Corpus) -> None:
    """A traceback quoted in a GitHub reply, prose before and after."""
    plain_kv = python("serve.py", env=v0_env())
    corpus.add(
        "github-quote-kv-cache-fenced.md",
        "github-quote",
        KV,
        f"{PYTHON} traceback, quoted as GitHub's Quote reply does with markdown on (generator: github_quote_reply)",
        github_quote_reply(
            "Thanks @maintainer. I tried the nightly wheel and it still fails on an A10G (24 GB):",
            plain_kv,
            "Setting `max_model_len` is not an option for us, we need the full 32k context. "
            "Is there anything else that frees KV cache memory?",
            fenced=True,
        ),
        "The original comment had the traceback in a fenced block; the quote keeps the fence.",
    )
    corpus.add(
        "github-quote-kv-cache-plain.md",
        "github-quote",
        KV,
        f"{PYTHON} traceback, quoted as GitHub's Quote reply does (generator: github_quote_reply)",
        github_quote_reply(
            "Same here on v0.10.2, log below.",
            plain_kv,
            "It worked on v0.9.0 with the same settings.",
            fenced=False,
        ),
    )
    plain_config = python("load_config.py")
    corpus.add(
        "github-quote-config-fenced.md",
        "github-quote",
        NO_MODEL_TYPE,
        f"{PYTHON} traceback, {TRANSFORMERS} raising, quoted by GitHub's Quote reply (generator: github_quote_reply)",
        github_quote_reply(
            "> Could you share the full error?",
            plain_config,
            "The folder only has the adapter weights, is that the problem?",
            fenced=True,
        ),
    )


def escape_remnants(corpus: Corpus) -> None:
    """Colour codes that lost their ESC: '^[[' and rsyslog's '#033['."""
    rich_colour = corpus.text("rich-kv-cache-w100-color.txt")
    oom_linux = corpus.text("ipython-oom-linux.txt")
    engine_colour = corpus.text("log-vllm-engine-core-color.txt")
    corpus.add(
        "escapes-caret-rich-kv-cache.txt",
        "escape-remnants",
        KV,
        f"{RICH} truecolor output, ESC shown as '^[' (generator: caret_escapes)",
        caret_escapes(rich_colour),
    )
    corpus.add(
        "escapes-caret-ipython-oom.txt",
        "escape-remnants",
        OOM,
        f"{IPYTHON} --colors=linux output, ESC shown as '^[' (generator: caret_escapes)",
        caret_escapes(oom_linux),
    )
    corpus.add(
        "escapes-syslog-vllm-engine-core.txt",
        "escape-remnants",
        NO_BLOCKS,
        "Python logging with vLLM's format and colours (VLLM_LOGGING_COLOR=1), each line "
        "through journald to rsyslog: '#033' for ESC, '#015' for CR (generator: syslog)",
        syslog(engine_colour, f"vllm[{ENGINE_PID - 1}]"),
    )


def log_prefixes(corpus: Corpus) -> None:
    """Lines that each start with a logger's or a process's prefix."""
    engine_raw = python("serve_v1.py")
    engine_colour = python("serve_v1.py", env=child_env(VLLM_LOGGING_COLOR="1"))
    corpus.add(
        "log-vllm-engine-core-raw.txt",
        "log-prefix",
        NO_BLOCKS,
        f"Python logging with vLLM's format (NewLineFormatter, CRLF), '(EngineCore_0 pid={ENGINE_PID}) ' "
        f"on each line of the engine-core process (multiprocessing, fork), {PYTHON}; bytes as captured",
        engine_raw,
        "Ends with the front end's RuntimeError 'Engine core initialization failed. See root "
        "cause above.' (vllm-engine-core-initialization-failed); the cause is above it.",
    )
    corpus.add(
        "log-vllm-engine-core-copied.txt",
        "log-prefix",
        NO_BLOCKS,
        "as log-vllm-engine-core-raw.txt, copied from a terminal (generator: terminal_copy)",
        terminal_copy(engine_raw),
    )
    corpus.add(
        "log-vllm-engine-core-color.txt",
        "log-prefix",
        NO_BLOCKS,
        "as log-vllm-engine-core-raw.txt with VLLM_LOGGING_COLOR=1 (cyan prefix, coloured levels)",
        engine_colour,
    )
    worker = python("ray_worker.py", env=v0_env(), expect_failure=False)
    corpus.add(
        "log-ray-worker-plain.txt",
        "log-prefix",
        KV,
        "Python logging with vLLM's format in a worker, each line prefixed as Ray's driver does "
        "(generator: ray_driver), copied from a terminal (generator: terminal_copy)",
        terminal_copy(ray_driver(worker, "RayWorkerWrapper", RAY_PID, None, colour=False)),
    )
    corpus.add(
        "log-ray-worker-remote-color.txt",
        "log-prefix",
        KV,
        "as log-ray-worker-plain.txt, a worker on another node (', ip=...') with Ray's colours, raw bytes",
        ray_driver(worker, "RayWorkerWrapper", RAY_PID + 1, "10.0.0.5", colour=True),
    )
    corpus.add(
        "log-plain-timestamp.txt",
        "log-prefix",
        NO_MODEL_TYPE,
        f"Python logging (basicConfig '%(asctime)s %(levelname)s %(name)s: %(message)s', "
        f"logger.exception), {TRANSFORMERS} raising",
        python("plain_log.py", expect_failure=False),
        "Only the first line carries the prefix; the traceback lines follow bare.",
    )
    corpus.add(
        "log-torchrun-tee.txt",
        "log-prefix",
        MAT,
        f"{TORCH} torchrun --standalone --nproc-per-node=1 --tee 3",
        run(
            [
                str(Path(sys.executable).with_name("torchrun")),
                "--standalone",
                "--nproc-per-node=1",
                "--tee",
                "3",
                "train.py",
            ]
        ),
        "'[default0]:' before each line of the worker; then torchrun's own ChildFailedError "
        "traceback and report, which must not hide the worker's error. Timings and pids vary.",
    )


def windows_paths(corpus: Corpus) -> None:
    """Frames under C:\\ as a Windows user's traceback shows them."""
    mapping = json.dumps(
        [
            [str(PROJ), r"C:\Users\me\proj"],
            [str(SITE), r"C:\Users\me\proj\.venv\Lib\site-packages"],
            [str(VENV_SITE), r"C:\Users\me\proj\.venv\Lib\site-packages"],
            [
                str(Path(shutil.__file__).parent),
                r"C:\Users\me\AppData\Local\Programs\Python\Python311\Lib",
            ],
        ]
    )
    for program, record, what in (
        ("load_config.py", NO_MODEL_TYPE, TRANSFORMERS),
        ("train.py", MAT, TORCH),
        ("serve.py", KV, "the stand-in vllm package"),
    ):
        corpus.add(
            f"windows-{Path(program).stem.replace('_', '-')}.txt",
            "windows-paths",
            record,
            f"{PYTHON} traceback.TracebackException.format() of a real error ({what}) after "
            "rewriting each FrameSummary.filename to a Windows path (not run on Windows)",
            python("windows_paths.py", str(PROJ / program), mapping, env=v0_env()),
        )


def trailing_logs(corpus: Corpus) -> None:
    """The traceback followed by more log lines, which are not part of the message."""
    corpus.add(
        "trailing-server-log.txt",
        "trailing-log",
        KV,
        f"{PYTHON} traceback.print_exc() between uvicorn-style log lines (Python logging)",
        python("server_log.py", env=v0_env(), expect_failure=False),
        "Exits 0: the server logs the failure and shuts down.",
    )
    corpus.add(
        "trailing-pytest-summary.txt",
        "trailing-log",
        MAT,
        f"{PYTEST} (-p no:cacheprovider --color=no --tb=native -rA)",
        pytest("test_model.py", "--color=no", "--tb=native", "-rA"),
    )


def short_class_names(corpus: Corpus) -> None:
    """Class names without their module, and messages cut short."""
    oom_plain = corpus.text("ipython-oom-nocolor.txt")
    hub_plain = corpus.text("ipython-hub-offline-nocolor.txt")
    corpus.add(
        "short-oom-ipython-last-line.txt",
        "short-class-name",
        OOM,
        f"last line of {IPYTHON} --colors=nocolor output (generator: last_line)",
        last_line(oom_plain),
    )
    corpus.add(
        "short-oom-ipython-minimal.txt",
        "short-class-name",
        OOM,
        f"{IPYTHON} (python -m IPython --colors=nocolor --InteractiveShell.xmode=Minimal -c)",
        ipython(IPYTHON_OOM_CELL, "nocolor", "--InteractiveShell.xmode=Minimal"),
    )
    corpus.add(
        "short-hub-ipython-last-line.txt",
        "short-class-name",
        LOCAL_ENTRY,
        f"last line of {IPYTHON} --colors=nocolor output, {HUB} raising (generator: last_line)",
        last_line(hub_plain),
    )
    corpus.add(
        "short-oom-first-sentences.txt",
        "short-class-name",
        OOM,
        f"first two sentences of a real {TORCH} OutOfMemoryError message (generator: first_sentences)",
        first_sentences(OOM_MESSAGE, 2) + "\n",
        "No class at all, and only the start of the message.",
    )


def build() -> list[Entry]:
    corpus = Corpus()
    for shape in (
        rich_tracebacks,
        ipython_tracebacks,
        pytest_runs,
        github_quotes,
        log_prefixes,
        escape_remnants,
        windows_paths,
        trailing_logs,
        short_class_names,
    ):
        shape(corpus)
    return corpus.entries


def committed_errkb(dest: Path) -> Path:
    """errkb and its records as committed at HEAD, exported into ``dest``: ``found_today`` is
    then errkb's state of record, not the work in progress of whoever shares the tree."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD", "errkb", "records"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def found_today(path: Path, errkb_root: Path) -> str | None:
    """The top record of ``errkb explain --json --no-probes -`` on a file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERRKB_")}
    env.update(PYTHONPATH=str(errkb_root), ERRKB_NO_CACHE="1")
    result = subprocess.run(
        [sys.executable, "-m", "errkb", "explain", "--json", "--no-probes", "-"],
        input=path.read_bytes(),
        capture_output=True,
        cwd=errkb_root,
        env=env,
        timeout=120,
        check=False,
    )
    try:
        matches = json.loads(result.stdout)["matches"]
    except (ValueError, KeyError):
        print(f"{path.name}: errkb explain gave no JSON: {result.stderr.decode()[-300:]}")
        return None
    return str(matches[0]["id"]) if matches else None


def main() -> None:
    for old in HERE.iterdir():
        if old.suffix in (".txt", ".md") and old.name != "README.md":
            old.unlink()
    write_tree()
    entries = build()
    with tempfile.TemporaryDirectory() as tree:
        errkb_root = committed_errkb(Path(tree))
        for entry in entries:
            (HERE / entry.file).write_bytes(entry.text.encode("utf-8"))
            entry.found_today = found_today(HERE / entry.file, errkb_root)
    manifest = [
        {
            key: value
            for key, value in dataclasses.asdict(entry).items()
            if key != "text" and not (key == "note" and value is None)
        }
        for entry in entries
    ]
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    right = sum(entry.found_today == entry.record for entry in entries)
    print(f"{len(entries)} files; errkb finds the right record today for {right}")
    shutil.rmtree(SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    main()
