"""errkb.advisors.environment._situations: the environment's errors no doctor check judges.

A busy rendezvous port, a small /dev/shm under a DataLoader worker or NCCL, a module compiled for
another numpy, vLLM's missing compiled module. Each is raised here by the real part where this
machine has one (torch's TCPStore on a port another socket holds, a DataLoader worker killed by
SIGBUS, numpy 2's own answer to a 1.x module, Python importing a vllm clone), or is a real
report's text (its URL beside it). Live errors are judged on an injected environment
(tests/environments.py) and an injected launch reading; pasted ones by what they say.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import sys
from pathlib import Path

import pytest
from environments import environment, stack, torch_build

import errkb
from errkb.diagnosis import diagnose, explain
from errkb.options import Options
from errkb.probes import Measurements
from errkb.probes.launch import LaunchReading
from errkb.probes.stack import Distribution, StackReading

GIB = 1 << 30
#: Release archives the miner downloads (wheels and sdists), where a test needs a real one.
MINE_CACHE = Path(__file__).resolve().parents[2] / ".mine-cache"
TORCHRUN = ("/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node=2", "train.py")
LAUNCH = LaunchReading(argv=TORCHRUN, free_port=41234)

#: https://github.com/meta-pytorch/torchtune/issues/392
BIND_98 = (
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
    "network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address "
    "already in use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - "
    "Address already in use)."
)
#: https://github.com/vllm-project/vllm/issues/39015 (its title)
LIBUV = (
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
    "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: "
    "address already in use"
)
#: https://github.com/meta-llama/llama-models/issues/210 (macOS, torch without 'port: N,')
LIBUV_MACOS = (
    "RuntimeError: The server socket has failed to listen on any local network address. "
    "useIpv6: 0, code: -48, name: EADDRINUSE, message: address already in use"
)
#: https://github.com/YYuX-1145/Bert-VITS2-Integration-package/issues/54 (Windows, a Chinese
#: system): c10d's log before the traceback; 10048 is WSAEADDRINUSE, its text the system's own.
WINDOWS_10048 = (
    "MASTER_ADDR: localhost,\nMASTER_PORT: 10086,\nWORLD_SIZE: 1,\nRANK: 0,\nLOCAL_RANK: 0\n"
    "[W socket.cpp:436] [c10d] The server socket has failed to bind to [DESKTOP-L9L2GVM]:10086 "
    "(system error: 10048 - 通常每 个套接字地址(协议/网络地址/端口)只允许使用一次。).\n"
    "[W socket.cpp:436] [c10d] The server socket has failed to bind to activate.adobe.com:10086 "
    "(system error: 10048 - 通常每个套接字地址(协议/网络地址/端口)只允许使用一次。).\n"
    "[E socket.cpp:472] [c10d] The server socket has failed to listen on any local network "
    "address.\n"
)
#: https://github.com/gitmylo/audio-webui/issues/202: 10013, access forbidden, not a taken port.
WINDOWS_10013 = (
    "[W ..\\torch\\csrc\\distributed\\c10d\\socket.cpp:426] [c10d] The server socket has "
    "failed to bind to [Halzou]:51545 (system error: 10013 - An attempt was made to access a "
    "socket in a way forbidden by its access permissions.)."
)
#: https://github.com/tatsu-lab/stanford_alpaca/issues/150: 10049 on connect, a client's error.
WINDOWS_10049 = (
    "[W ..\\torch\\csrc\\distributed\\c10d\\socket.cpp:601] [c10d] The client socket has "
    "failed to connect to [Kepar-PC.28090]:2233 (system error: 10049 - The requested address is "
    "not valid in its context.)."
)
#: https://github.com/meta-llama/llama-cookbook/issues/186: the command, then torch's log.
PASTED_TORCHRUN = (
    "torchrun --nnodes 1 --nproc_per_node 4  examples/finetuning.py --enable_fsdp --model_name "
    "/home/xhuang/llama-recipes-main/model_hf/7B/ --use_peft --peft_method lora --dataset "
    "alpaca_dataset  --save_model --dist_checkpoint_root_folder model_checkpoints "
    "--dist_checkpoint_folder fine-tuned --pure_bf16 --output_dir "
    "/home/xhuang/llama-recipes-main/PEFT/model\n\n"
    "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - "
    "Address already in use).\n"
    "[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 "
    "- Address already in use).\n"
    "[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network "
    "address.\n"
)
#: https://github.com/pytorch/pytorch/issues/85604: --standalone already, the script's own port.
PASTED_STANDALONE = (
    "torchrun --standalone --nnodes=1 --nproc_per_node=2 train.py --local_rank 0\n"
    "[W socket.cpp:401] [c10d] The server socket has failed to listen on [::]:47531 (errno: 98 - "
    "Address already in use).\n"
    "[W socket.cpp:401] [c10d] The server socket has failed to bind to 0.0.0.0:47531 (errno: 98 "
    "- Address already in use).\n"
    "[E socket.cpp:435] [c10d] The server socket has failed to listen on any local network "
    "address.\n"
)
#: https://github.com/hkchengrex/STCN/issues/132
BUS = (
    "RuntimeError: DataLoader worker (pid 46794) is killed by signal: Bus error. It is possible "
    "that dataloader's workers are out of shared memory. Please try to raise your shared memory "
    "limit."
)
#: https://github.com/msr-fiddle/pipedream/issues/28
BUS_WORKER = (
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
    "shared memory (shm)."
)
#: https://github.com/vllm-project/vllm/issues/14537
NCCL_SHM = (
    "NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error "
    "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\nncclSystemError: System call "
    "(e.g. socket, malloc) or external library call failed or device error. \nLast error:\nError "
    "while creating shared memory segment /dev/shm/nccl-EoOvZr (size 7340384)"
)
#: The torch-nccl-error record's example (a failed connect, not /dev/shm).
NCCL_SOCKET = (
    "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system "
    "error, NCCL version 2.14.3\nncclSystemError: System call (e.g. socket, malloc) or external "
    "library call failed or device error. \nLast error:\nsocketStartConnect: Connect to "
    "10.0.0.2<35553> failed : Software caused connection abort"
)
#: https://github.com/jupyter/notebook/issues/7522
NUMPY_1X = (
    "ImportError: \nA module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.0 as "
    "it may crash. To support both 1.x and 2.x\nversions of NumPy, modules must be compiled with "
    "NumPy 2.0.\nSome module may need to rebuild instead e.g. with 'pybind11>=2.12'.\n\nIf you "
    "are a user of the module, the easiest solution will be to\ndowngrade to 'numpy<2' or try to "
    "upgrade the affected module.\nWe expect that some modules will need time to support NumPy 2."
)
#: https://github.com/matterport/Mask_RCNN/issues/3063
DTYPE_SIZE = (
    "ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from "
    "C header, got 88 from PyObject"
)
#: https://github.com/ibarrond/Pyfhel/issues/103: Cython's numpy.import_array raised it, and the
#: ImportError from it.
C_API_0E = "RuntimeError: module compiled against API version 0xe but this version of numpy is 0xd"
#: https://github.com/stack-of-tasks/pinocchio/issues/1873 (numpy 1.21.5 installed)
C_API_10 = (
    "RuntimeError: module compiled against API version 0x10 but this version of numpy is 0xe . "
    "Check the section C-API incompatibility at the Troubleshooting ImportError section at "
    "https://numpy.org/devdocs/user/troubleshooting-importerror.html#c-api-incompatibility for "
    "indications on how to solve this problem ."
)
#: https://github.com/opendatalab/MinerU/issues/1673 (Windows, importing magic_pdf's models)
C_ABI_1_UNDER_2 = (
    "RuntimeError: module compiled against ABI version 0x1000009 but this version of numpy is "
    "0x2000000"
)
#: https://github.com/pytorch/pytorch/issues/53473 (its title)
CUBLAS_INTERNAL = (
    "RuntimeError: CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`"
)
#: https://github.com/isl-org/DPT/issues/4
CUBLAS_EXECUTION = (
    "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, "
    "opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, "
    "ldc, CUDA_R_32F, CUBLAS_GEMM_DFALT_TENSOR_OP)`"
)
CUBLAS_ERRORS = [
    (CUBLAS_INTERNAL, "torch-cublas-status-internal-error"),
    (CUBLAS_EXECUTION, "torch-cublas-status-execution-failed"),
]


def _options(env: object = None, launch: object = None) -> Options:
    readings = {k: v for k, v in (("environment", env), ("launch", launch)) if v is not None}
    # A diagnosis' first run in a process loads the registry; on a loaded machine that can take
    # the default bound, leaving the advisor none: the bound is not what these tests are about.
    return Options(measurements=Measurements(readings=readings), timeout=60.0)


def _record(found: errkb.Diagnosis | None) -> str | None:
    """The id of the first finding's record, or None when nothing was diagnosed."""
    return found.findings[0].record.id if found else None


def _command(found: errkb.Diagnosis | None) -> object:
    assert found is not None
    solutions = found.findings[0].solutions
    return solutions[0].settings.get("command") if solutions else None


def _raised(exc: BaseException, options: Options) -> errkb.Diagnosis | None:
    """The diagnosis of ``exc`` raised here, live (with a traceback), under ``options``."""
    try:
        raise exc
    except BaseException as caught:  # any exception the test chose
        return diagnose(caught, options=options)


def _noted(found: errkb.Diagnosis | None, words: str) -> tuple[object, bool]:
    """The command, and whether a note says ``words``: a case that gets a reason, not a fix."""
    assert found is not None
    return _command(found), any(words in n for n in found.notes)


def _verdict(found: errkb.Diagnosis | None) -> str | None:
    assert found is not None
    return next(
        (f.note.split(":")[0] for f in found.findings[0].facts if f.name == "verdict"), None
    )


# -- the records, on real messages ---------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "record", "captures"),
    [
        (BIND_98, "torch-rendezvous-port-in-use", {"port": 29500}),
        (LIBUV, "torch-rendezvous-port-in-use", {"port": 29500}),
        (LIBUV_MACOS, "torch-rendezvous-port-in-use", {"port": None}),
        (WINDOWS_10048, "torch-rendezvous-port-in-use", {"port": 10086}),
        (BUS, "torch-dataloader-worker-bus-error", {"pid": 46794}),
        (BUS_WORKER, "torch-dataloader-worker-bus-error-printed", {}),
        (NCCL_SHM, "torch-nccl-error", {"nccl_error": "unhandled system error (run with NCCL_DEBUG=INFO for details)"}),
        (NUMPY_1X, "numpy-compiled-for-other-numpy", {"numpy": "2.0.0"}),
        (DTYPE_SIZE, "numpy-dtype-size-changed", {"expected": 96, "got": 88}),
        (C_API_10, "numpy-compiled-for-newer-c-api", {"module_api": "0x10", "numpy_api": "0xe"}),
        (C_API_0E, "numpy-compiled-for-newer-c-api", {"module_api": "0xe", "numpy_api": "0xd"}),
        (C_ABI_1_UNDER_2, "numpy-compiled-for-other-c-abi", {"module_abi": "0x1000009", "numpy_abi": "0x2000000"}),
        (CUBLAS_INTERNAL, "torch-cublas-status-internal-error", {"call": "cublasCreate(handle)"}),
        (CUBLAS_EXECUTION, "torch-cublas-status-execution-failed", {}),
        ("ModuleNotFoundError: No module named 'vllm._C'", "vllm-compiled-module-missing", {"module": "vllm._C"}),
    ],
)  # fmt: skip
def test_each_record_matches_a_real_message(message, record, captures):
    """The real message finds its record first, with the captures the advisor reads."""
    top = errkb.lookup(message)[0]
    assert (record, captures) == (
        top.record.id,
        {k: top.captures.get(k) for k in captures},
    )


# -- a rendezvous port that is taken -------------------------------------------------------


@pytest.fixture
def busy_port():
    """A port another socket listens on, for as long as the test runs."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("libuv", [True, False], ids=["libuv", "socket"])
def test_tcp_store_on_a_busy_port_raised_by_real_torch(busy_port, libuv):
    """torch's own TCPStore fails on the taken port: torchrun again on the probe's free port."""
    dist = pytest.importorskip("torch.distributed")
    with pytest.raises(RuntimeError) as caught:
        dist.TCPStore("localhost", busy_port, 1, True, use_libuv=libuv, wait_for_workers=False)
    found = diagnose(caught.value, options=_options(environment(), LAUNCH))
    assert found is not None
    assert (
        "torch-rendezvous-port-in-use",
        {"name": "port", "value": str(busy_port)},
        "torchrun --nproc-per-node=2 --master-port=41234 train.py",
    ) == (
        found.findings[0].record.id,
        next({"name": f.name, "value": f.value} for f in found.findings[0].facts
             if f.name == "port"),
        _command(found),
    )  # fmt: skip


def test_init_process_group_env_rendezvous_gets_master_port(busy_port, monkeypatch):
    """init_method='env://' in a script: MASTER_PORT on the script's own command line."""
    dist = pytest.importorskip("torch.distributed")
    monkeypatch.setenv("MASTER_ADDR", "localhost")
    monkeypatch.setenv("MASTER_PORT", str(busy_port))
    launch = LaunchReading(argv=("/usr/bin/python3", "train.py", "--epochs", "3"), free_port=41234)
    with pytest.raises(RuntimeError) as caught:
        dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1)
    found = diagnose(caught.value, options=_options(environment(), launch))
    assert ("torch-rendezvous-port-in-use", "MASTER_PORT=41234 python train.py --epochs 3") == (
        _record(found),
        _command(found),
    )


def test_torchrun_with_an_endpoint_gets_the_endpoint_s_port_changed():
    """--rdzv-endpoint wins over --master-port in torchrun: its port is the one changed."""
    launch = LaunchReading(
        argv=("python3", "-m", "torch.distributed.run", "--rdzv_endpoint", "node1:29400",
              "--nnodes=2", "train.py"),
        free_port=41234,
    )  # fmt: skip
    found = _raised(RuntimeError(LIBUV.split(": ", 1)[1]), _options(environment(), launch))
    expected = "python -m torch.distributed.run --nnodes=2 --rdzv-endpoint=node1:41234 train.py"
    assert expected == _command(found)


def test_the_launch_probe_finds_a_port_that_is_free():
    """Live with probes on: the port the probe gives can be bound at once."""
    from errkb.probes.launch import free_port

    port = free_port()
    assert port is not None
    with socket.socket() as sock:
        sock.bind(("", port))
        assert port == sock.getsockname()[1]


def test_pasted_torchrun_command_gets_standalone():
    """A pasted torchrun command on one machine: the same command with --standalone."""
    found = explain(PASTED_TORCHRUN)
    expected = (
        "torchrun --standalone --nnodes 1 --nproc_per_node 4 examples/finetuning.py "
        "--enable_fsdp --model_name /home/xhuang/llama-recipes-main/model_hf/7B/ --use_peft "
        "--peft_method lora --dataset alpaca_dataset --save_model --dist_checkpoint_root_folder "
        "model_checkpoints --dist_checkpoint_folder fine-tuned --pure_bf16 --output_dir "
        "/home/xhuang/llama-recipes-main/PEFT/model"
    )
    assert ("torch-rendezvous-port-in-use", expected) == (
        _record(found),
        _command(found),
    )


def test_pasted_torchrun_already_standalone_gets_no_command():
    """--standalone already: the port is the program's own, and no command is made up."""
    found = explain(PASTED_STANDALONE)
    assert (None, True) == _noted(found, "already uses --standalone")


def test_pasted_error_alone_keeps_the_record_s_fix():
    """Without the command line or the machine, no port is invented."""
    found = explain(BIND_98)
    assert found is not None
    assert (None, True) == (
        _command(found),
        found.findings[0].solutions[0].text.startswith("Start again on a free port"),
    )


@pytest.mark.parametrize("message", [WINDOWS_10013, WINDOWS_10049], ids=["10013", "10049"])
def test_windows_errors_other_than_a_taken_port_are_not_claimed(message):
    """Windows' 10013 (access forbidden) and 10049 (address not valid): not a port in use."""
    assert "torch-rendezvous-port-in-use" not in [m.record.id for m in errkb.lookup(message)]


def test_windows_bind_error_raised_under_torchrun_gets_the_free_port():
    """Windows' 10048 under torchrun: the same launch on the probe's free port."""
    bind = WINDOWS_10048.splitlines()[6].split("[c10d] ", 1)[1]
    found = _raised(RuntimeError(bind), _options(environment(), LAUNCH))
    expected = "torchrun --nproc-per-node=2 --master-port=41234 train.py"
    assert ("torch-rendezvous-port-in-use", expected) == (
        _record(found),
        _command(found),
    )


def test_pasted_windows_log_names_the_port_and_invents_no_command():
    """The pasted Windows log: the port it names is a fact; no free port is made up for it."""
    found = explain(WINDOWS_10048)
    assert found is not None
    assert ("torch-rendezvous-port-in-use", "10086", None) == (
        found.findings[0].record.id,
        next(f.value for f in found.findings[0].facts if f.name == "port"),
        _command(found),
    )


# -- /dev/shm --------------------------------------------------------------------------------


def _bus_worker(_: int) -> None:
    os.kill(os.getpid(), signal.SIGBUS)


def test_dataloader_worker_bus_error_raised_by_real_torch_in_a_small_shm_container():
    """A worker killed by SIGBUS, torch's real error; a 64 MiB /dev/shm in Docker: --shm-size."""
    data = pytest.importorskip("torch.utils.data")
    loader = data.DataLoader(range(4), num_workers=1, collate_fn=_bus_worker)
    with pytest.raises(RuntimeError) as caught:
        next(iter(loader))
    env = environment(container="docker", shm_bytes=64 << 20, memory_bytes=64 * GIB)
    found = diagnose(caught.value, options=_options(env))
    assert (
        "torch-dataloader-worker-bus-error",
        "shm-small",
        "docker run --shm-size=32g ...",
    ) == (_record(found), _verdict(found), _command(found))


def test_bus_error_with_a_large_shm_says_so_and_gives_no_command():
    """Outside a container /dev/shm is not the cause the machine shows: no --shm-size."""
    found = _raised(RuntimeError(BUS.removeprefix("RuntimeError: ")), _options(environment()))
    assert (None, True) == _noted(found, "/dev/shm is not small here")


def test_pasted_bus_error_gets_the_verdict_without_a_size():
    """Pasted: the cause is said, and no size is computed for a machine not described."""
    found = explain(BUS_WORKER)
    assert ("shm-small", None) == (_verdict(found), _command(found))


def test_nccl_shared_memory_error_raised_in_a_small_shm_container():
    """NCCL's system error naming /dev/shm, raised as torch raises it: the container's size."""
    dist = pytest.importorskip("torch.distributed")
    env = environment(container="docker", shm_bytes=64 << 20, memory_bytes=128 * GIB)
    found = _raised(dist.DistBackendError(NCCL_SHM), _options(env))
    assert ("torch-nccl-error", "shm-small", "docker run --shm-size=64g ...") == (
        _record(found),
        _verdict(found),
        _command(found),
    )


def test_pasted_nccl_error_naming_dev_shm_gets_the_verdict():
    """Pasted: NCCL's 'Last error' names /dev/shm, which is the verdict."""
    assert "shm-small" == _verdict(explain(NCCL_SHM))


def test_pasted_nccl_socket_error_is_not_blamed_on_shm():
    """NCCL's system error from a failed connect: no /dev/shm verdict, NCCL's own words kept."""
    found = explain(NCCL_SOCKET)
    assert (None, None) == (_verdict(found), _command(found))


# -- numpy's binary interface ----------------------------------------------------------------


@pytest.fixture
def old_module(tmp_path, monkeypatch):
    """A package in a site-packages folder that asks numpy 2 for the 1.x C API, as a 1.x
    extension's import_array() does."""
    site = tmp_path / "site-packages"
    (site / "oldext").mkdir(parents=True)
    (site / "oldext" / "__init__.py").write_text(
        "import numpy.core._multiarray_umath as umath\napi = umath._ARRAY_API\n"
    )
    monkeypatch.syspath_prepend(str(site))
    yield "oldext"
    sys.modules.pop("oldext", None)


def _numpy_env(*requires: tuple[str, str, tuple[str, ...]]) -> object:
    dists = tuple(
        Distribution(name=n, version=v, folder=f"/site/{n}-{v}.dist-info", requires=r)
        for n, v, r in requires
    )
    return environment(
        installed=StackReading(distributions=dists, checked=len(dists), broken=(), source="test")
    )


def test_numpy_2_refusing_a_1x_module_raised_by_real_numpy(old_module):
    """numpy 2's real ImportError for a 1.x module; nothing requires numpy 2: pin numpy<2."""
    pytest.importorskip("numpy.core._multiarray_umath")
    env = _numpy_env(("numpy", "2.4.6", ()), ("oldext", "1.0", ("numpy>=1.20",)))
    with pytest.raises(ImportError) as caught:
        importlib.import_module(old_module)
    found = diagnose(caught.value, options=_options(env))
    assert ("numpy-compiled-for-other-numpy", 'pip install "numpy<2"') == (
        _record(found),
        _command(found),
    )


def test_a_1x_module_when_another_package_requires_numpy_2_is_upgraded(old_module):
    """transformers-like requirement numpy>=2: the pin would break it, upgrade the module."""
    pytest.importorskip("numpy.core._multiarray_umath")
    env = _numpy_env(
        ("numpy", "2.4.6", ()),
        ("oldext", "1.0", ("numpy>=1.20",)),
        ("newlib", "3.0", ("numpy>=2.0",)),
    )
    with pytest.raises(ImportError) as caught:
        importlib.import_module(old_module)
    found = diagnose(caught.value, options=_options(env))
    assert "pip install --upgrade oldext" == _command(found)


def test_dtype_size_changed_upgrades_numpy():
    """Built against a newer numpy (96 > 88 bytes): upgrade numpy when nothing pins it."""
    env = _numpy_env(("numpy", "1.26.4", ()), ("pandas", "2.2.3", ("numpy>=1.22.4",)))
    found = _raised(ValueError(DTYPE_SIZE.removeprefix("ValueError: ")), _options(env))
    assert ("numpy-dtype-size-changed", "pip install --upgrade numpy") == (
        _record(found),
        _command(found),
    )


def test_dtype_size_changed_with_a_numpy_1_pin_gives_no_command():
    """Something requires numpy<2: upgrading would break it, so no command, and why."""
    env = _numpy_env(("numpy", "1.26.4", ()), ("pinned", "1.0", ("numpy<2",)))
    found = _raised(ValueError(DTYPE_SIZE.removeprefix("ValueError: ")), _options(env))
    assert (None, True) == _noted(found, "pinned 1.0 (numpy<2)")


def test_pasted_numpy_1x_message_pins_numpy():
    """Pasted: the module needs numpy 1.x, which is what the message says."""
    assert 'pip install "numpy<2"' == _command(explain(NUMPY_1X))


def _import_array_failed(message: str, options: Options) -> errkb.Diagnosis | None:
    """Cython's numpy.import_array: the RuntimeError, then ImportError raised while handling it."""
    try:
        try:
            raise RuntimeError(message.removeprefix("RuntimeError: "))
        except RuntimeError:
            raise ImportError("numpy.core.multiarray failed to import")
    except ImportError as caught:
        return diagnose(caught, options=options)


def test_a_module_built_for_a_newer_numpy_1x_gets_the_first_release_of_its_c_api():
    """C-API 0x10 under numpy 1.21.5 (0xe), nothing pins numpy: numpy 1.23 to 1.x."""
    env = _numpy_env(("numpy", "1.21.5", ()), ("pin", "2.6.17", ("numpy",)))
    found = _import_array_failed(C_API_10, _options(env))
    assert ("numpy-compiled-for-newer-c-api", 'pip install "numpy>=1.23,<2"') == (
        _record(found),
        _command(found),
    )


def test_a_module_built_for_a_newer_numpy_where_a_package_pins_an_older_gets_no_command():
    """Something requires numpy<1.20: no release from 1.20 to 1.26 fits, so no command, and why."""
    env = _numpy_env(("numpy", "1.19.5", ()), ("oldpin", "1.0", ("numpy<1.20",)))
    found = _import_array_failed(C_API_0E, _options(env))
    assert (None, True) == _noted(found, "oldpin 1.0 (numpy<1.20)")


def test_a_1x_abi_module_under_numpy_2_pins_numpy_below_2():
    """numpy 1.x's ABI check under numpy 2.1.2, nothing requiring numpy 2: numpy<2."""
    env = _numpy_env(("numpy", "2.1.2", ()), ("pin", "2.6.17", ("numpy>=1.20",)))
    found = _import_array_failed(C_ABI_1_UNDER_2, _options(env))
    assert ("numpy-compiled-for-other-c-abi", 'pip install "numpy<2"') == (
        _record(found),
        _command(found),
    )


def test_a_1x_abi_module_where_a_package_requires_numpy_2_gets_no_command():
    """Something requires numpy>=2 and no module is named: no pin is given, and why."""
    env = _numpy_env(("numpy", "2.1.2", ()), ("newlib", "3.0", ("numpy>=2.0",)))
    found = _import_array_failed(C_ABI_1_UNDER_2, _options(env))
    assert (None, True) == _noted(found, "newlib 3.0 (numpy>=2.0)")


def test_pasted_c_api_message_gets_the_release_from_the_message():
    """Pasted: the installed set is not known; the release is the message's C-API version's."""
    found = explain(C_API_0E)
    assert ("numpy-compiled-for-newer-c-api", 'pip install "numpy>=1.20,<2"', True) == (
        _record(found),
        *_noted(found, "requirements of the installed distributions were not read"),
    )


# -- vLLM's compiled module ------------------------------------------------------------------


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A vllm source tree first on sys.path, whose package imports the _C it never built."""
    tree = tmp_path / "src" / "vllm"
    (tree / "vllm" / "platforms").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("from vllm.platforms import cuda\n")
    (tree / "vllm" / "platforms" / "__init__.py").write_text("")
    (tree / "vllm" / "platforms" / "cuda.py").write_text("import vllm._C  # noqa\n")
    monkeypatch.syspath_prepend(str(tree))
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    yield tree
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[name]


def test_vllm_clone_shadowing_the_install_raised_by_python(clone):
    """Python imports the clone and finds no _C: build the clone in place, named by folder."""
    env = environment(installed=stack(("torch", "2.13.0+cu126"), ("vllm", "0.11.1")))
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module("vllm")
    found = diagnose(caught.value, options=_options(env))
    assert (
        "No module named 'vllm._C'",
        "vllm-compiled-module-missing",
        f"cd {clone} && VLLM_USE_PRECOMPILED=1 pip install --editable .",
    ) == (str(caught.value), _record(found), _command(found))


def test_pasted_vllm_c_without_a_traceback_keeps_the_record_s_fix():
    """https://github.com/vllm-project/vllm/issues/31789: only the line, no folder to name."""
    found = explain("ModuleNotFoundError: No module named 'vllm._C'")
    assert (None, True) == _noted(found, "no traceback frame")


# -- bitsandbytes' native library ----------------------------------------------------------

#: https://github.com/bitsandbytes-foundation/bitsandbytes/issues/1210
BNB_NONE = "AttributeError: 'NoneType' object has no attribute 'cquantize_blockwise_fp16_nf4'"


def _bnb_call_on_none(env: object) -> errkb.Diagnosis | None:
    """bitsandbytes 0.41-0.45 call their library's function on the None it kept: CPython's
    own AttributeError."""
    lib = None
    try:
        lib.cquantize_blockwise_fp16_nf4()  # type: ignore[attr-defined]
    except AttributeError as exc:
        return diagnose(exc, options=_options(env))
    raise AssertionError("unreachable")


def test_bnb_library_none_with_a_cpu_torch_on_a_gpu_machine_gets_the_cuda_torch():
    """The CPU torch under an H100: the doctor's cpu-torch-with-gpu command is the fix."""
    from errkb.advisors.environment.verdicts import judge

    env = environment(
        torch=torch_build("2.13.0+cpu", cuda=None),
        installed=stack(("torch", "2.13.0+cpu"), ("bitsandbytes", "0.45.5")),
    )
    expected = next(v.commands[0] for v in judge(env) if v.code == "cpu-torch-with-gpu")
    found = _bnb_call_on_none(env)
    assert ("bitsandbytes-native-library-none", expected) == (
        _record(found),
        _command(found),
    )


def test_bnb_library_none_with_a_cuda_torch_gets_bitsandbytes_own_diagnosis():
    """torch has CUDA: which library failed is bitsandbytes' to say."""
    found = _bnb_call_on_none(environment())
    assert ("bitsandbytes-library", "python -m bitsandbytes") == (_verdict(found), _command(found))


def test_pasted_bnb_library_none_gets_bitsandbytes_own_diagnosis():
    """Pasted: the same diagnosis command, for the machine that raised it."""
    assert "python -m bitsandbytes" == _command(explain(BNB_NONE))


BNB_CPU_INSTALL = "pip install --force-reinstall --no-deps bitsandbytes==0.48.2"
#: The report tools' real outputs (tests/data/environments/README.md gives each source).
ENVS = Path(__file__).resolve().parents[1] / "data" / "environments"


def test_bnb_cpu_library_missing_a_gpu_function_under_a_cuda_torch_gets_the_release(tmp_path):
    """A CPU library built here, loaded by ctypes as bitsandbytes does: the real loader's
    'undefined symbol'; torch built for CUDA 12.4 on an H100: the release with a cu124 library."""
    import ctypes

    from environments import compile_library

    library = compile_library("int cquantize_blockwise_cpu_fp32(void) { return 0; }\n",
                              tmp_path / "bitsandbytes" / "libbitsandbytes_cpu.so")  # fmt: skip
    lib = ctypes.cdll.LoadLibrary(str(library))
    with pytest.raises(AttributeError) as caught:
        lib.cquantize_blockwise_fp16_nf4  # the lookup is what fails
    env = environment(
        torch=torch_build("2.5.1+cu124", cuda="12.4"),
        installed=stack(("torch", "2.5.1+cu124"), ("bitsandbytes", "0.45.5")),
    )
    found = diagnose(caught.value, options=_options(env))
    assert ("bitsandbytes-cpu-library-missing-function", "bitsandbytes-cpu-library",
            BNB_CPU_INSTALL) == (_record(found),
                                 _verdict(found), _command(found))  # fmt: skip


def test_pasted_bnb_cpu_warning_beside_a_cuda_torch_s_collect_env_gets_the_release():
    """bitsandbytes#779's output after vllm#13497's collect_env (torch 2.5.1+cu121, RTX 4090)."""
    text = "\n".join(
        (ENVS / n).read_text(encoding="utf-8")
        for n in ("vllm-13497-collect-env-4090.txt", "bitsandbytes-779-cpu-library.txt")
    )
    found = explain(text)
    assert ("bitsandbytes-compiled-without-gpu-support", BNB_CPU_INSTALL) == (
        _record(found),
        _command(found),
    )


def test_pasted_bnb_cpu_warning_alone_says_what_is_not_known():
    """bitsandbytes#779's output alone: no GPU, no torch said; no verdict, and why."""
    text = (ENVS / "bitsandbytes-779-cpu-library.txt").read_text(encoding="utf-8")
    assert (None, True) == _noted(explain(text), "bitsandbytes loaded its CPU library")


# -- safetensors' memory map -----------------------------------------------------------------

#: https://github.com/huggingface/transformers/issues/25179
NO_DEVICE = "OSError: No such device (os error 19)"


def test_safe_open_on_a_folder_raised_by_real_safetensors(tmp_path):
    """safetensors' own safe_open on a folder: the folder is named, and what is in it listed."""
    safetensors = pytest.importorskip("safetensors")
    folder = tmp_path / "model"
    folder.mkdir()

    def load_file(filename: str) -> None:  # the frame and local name of safetensors.torch
        safetensors.safe_open(filename, "pt")

    with pytest.raises(OSError, match=r"os error 19") as caught:
        load_file(str(folder))
    found = diagnose(caught.value, options=_options(environment()))
    assert ("safetensors-mmap-no-such-device", "safetensors-folder", f"ls {folder}") == (
        _record(found),
        _verdict(found),
        _command(found),
    )


def test_a_file_on_a_fuse_mount_names_the_mount():
    """A file under a fuse.mergerfs mount (mounts as /proc/self/mounts writes them)."""
    from errkb.advisors.environment._situations import mapped_path

    mounts = (
        "overlay / overlay rw,relatime 0 0\n"
        "mergerfs:/srv /mnt/pool fuse.mergerfs rw,relatime,user_id=0,group_id=0 0 0\n"
    )
    verdict, facts, _ = mapped_path("/mnt/pool/models/model.safetensors", mounts)
    assert ("safetensors-no-mmap", "fuse.mergerfs at /mnt/pool") == (
        verdict.code if verdict else None,
        next(f.value for f in facts if f.name == "file_system"),
    )


def test_pasted_no_such_device_says_the_path_is_not_known():
    """Pasted: the message names no path, so neither folder nor mount is claimed."""
    found = explain(NO_DEVICE)
    assert (None, True) == _noted(found, "does not say which path")


def test_installed_vllm_pinning_another_torch_gets_the_pinned_torch():
    """vLLM from site-packages, its torch==2.4.0 broken by torch 2.13.0: the doctor's command."""
    from errkb.advisors.environment.verdicts import judge
    from errkb.probes.stack import Broken

    broken = Broken(distribution="vllm", version="0.6.3", requirement="torch==2.4.0",
                    required="torch", installed="2.13.0+cu126")  # fmt: skip
    env = environment(
        installed=stack(("torch", "2.13.0+cu126"), ("vllm", "0.6.3"), broken=(broken,))
    )
    expected = next(v.commands[0] for v in judge(env) if v.code == "requirement-broken")
    site_file = "/usr/lib/python3/site-packages/vllm/platforms/cuda.py"
    from errkb.advisors.environment._situations import compiled_module

    verdict, _, _ = compiled_module(env, [site_file])
    assert ("requirement-broken", expected) == (
        verdict.code if verdict else None,
        verdict.commands[0] if verdict else None,
    )


#: https://github.com/NVIDIA/nccl/issues/1016: a line of its NCCL_DEBUG=INFO log, then its title.
NCCL_IB = (
    "pytorchjob-summarization-long-data-8vry-ravi-agrawa-worker-2:427:534 [1] NCCL INFO NET/IB : "
    "Using [0]rocep204s0f0v6:1/RoCE [RO]; OOB net1:192.168.102.12<0>\n"
    "NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1"
)


def test_pasted_nccl_system_error_over_infiniband_names_the_variable_to_test_it():
    """The log shows NET/IB: NCCL_IB_DISABLE=1 is said as a test, not given as the fix."""
    found = explain(NCCL_IB)
    assert (None, True) == _noted(found, "NCCL_IB_DISABLE=1 makes it use sockets")


def test_bnb_cpu_library_loaded_by_ctypes_on_a_cpu_torch_gets_the_cuda_torch(tmp_path):
    """bitsandbytes 0.42.0's own CPU library, loaded by ctypes as it does, lacks the function."""
    import ctypes
    import zipfile

    from errkb.advisors.environment.verdicts import judge

    wheel = next(iter(sorted(MINE_CACHE.glob("bitsandbytes-0.42.0-py3-none-any.whl"))), None)
    if wheel is None:
        pytest.skip("needs bitsandbytes 0.42.0's wheel in .mine-cache")
    with zipfile.ZipFile(wheel) as archive:
        library = archive.extract("bitsandbytes/libbitsandbytes_cpu.so", tmp_path)
    env = environment(
        torch=torch_build("2.13.0+cpu", cuda=None),
        installed=stack(("torch", "2.13.0+cpu"), ("bitsandbytes", "0.42.0")),
    )
    lib = ctypes.cdll.LoadLibrary(library)
    with pytest.raises(AttributeError) as caught:
        lib.cquantize_blockwise_fp16_nf4  # the lookup is what fails
    found = diagnose(caught.value, options=_options(env))
    expected = next(v.commands[0] for v in judge(env) if v.code == "cpu-torch-with-gpu")
    assert ("bitsandbytes-cpu-library-missing-function", expected) == (
        _record(found),
        _command(found),
    )


# -- the CUDA library wheels torch pins ----------------------------------------------------

#: https://github.com/pytorch/pytorch/issues/134403
CUFFT = (
    "    return _VF.stft(input, n_fft, hop_length, win_length, window,  # type: ignore"
    "[attr-defined]\nRuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR"
)
#: https://github.com/ai-forever/ru-dalle/issues/123 (torch's jit fuser, a CUDA 11.1 libnvrtc)
NVRTC_11_1 = (
    "RuntimeError: nvrtc: error: failed to open libnvrtc-builtins.so.11.1.\n"
    "  Make sure that libnvrtc-builtins.so.11.1 is installed correctly.\n"
    "nvrtc compilation failed: \n"
)
#: torch 2.5.1's wheel pins (errkb/advisors/environment/tables/cuda_wheel_pins.json).
TORCH_251_PINS = (
    'nvidia-cuda-nvrtc-cu12==12.4.127; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cufft-cu12==11.2.1.3; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cublas-cu12==12.4.5.8; platform_system == "Linux" and platform_machine == "x86_64"',
)


def _pinned_env(*wheels: tuple[str, str], broken: tuple[object, ...] = (), folder: str = "/site"):
    torch = Distribution(
        name="torch", version="2.5.1", folder=f"{folder}/t.dist-info", requires=TORCH_251_PINS
    )
    dists = (
        torch,
        *(Distribution(name=n, version=v, folder=f"{folder}/w.dist-info") for n, v in wheels),
    )
    installed = StackReading(distributions=dists, checked=len(dists), broken=broken, source="t")
    return environment(torch=torch_build("2.5.1+cu124", cuda="12.4"), installed=installed)


def test_cufft_error_with_another_cufft_wheel_than_torch_pins_installs_the_pin():
    """torch 2.5.1 pins nvidia-cufft-cu12 11.2.1.3, 11.3.0.4 is installed: the pin is the fix."""
    from errkb.probes.stack import Broken

    broken = Broken(distribution="torch", version="2.5.1", required="nvidia-cufft-cu12",
                    requirement="nvidia-cufft-cu12==11.2.1.3", installed="11.3.0.4")  # fmt: skip
    env = _pinned_env(("nvidia-cufft-cu12", "11.3.0.4"), broken=(broken,))
    found = _raised(RuntimeError("cuFFT error: CUFFT_INTERNAL_ERROR"), _options(env))
    assert ("torch-cufft-error", "cuda-wheel-mismatch", 'pip install "nvidia-cufft-cu12==11.2.1.3"') == (
        _record(found),
        _verdict(found),
        _command(found),
    )  # fmt: skip


def test_cufft_error_with_the_pinned_wheel_gives_no_command():
    """The installed wheel is torch's pin: no reinstall is made up, and the note says so."""
    env = _pinned_env(("nvidia-cufft-cu12", "11.2.1.3"))
    found = _raised(RuntimeError("cuFFT error: CUFFT_INTERNAL_ERROR"), _options(env))
    assert (None, True) == _noted(found, "nvidia-cufft-cu12 11.2.1.3 is installed")


def test_pasted_cufft_error_names_no_machine():
    """Pasted: the pins are torch's, the installed set is not known; pip check is said."""
    found = explain(CUFFT)
    assert ("torch-cufft-error", None, True) == (
        _record(found),
        *_noted(found, "pin their nvidia-cufft-cuNN release"),
    )


@pytest.mark.parametrize(("message", "record"), CUBLAS_ERRORS)
def test_cublas_error_with_another_cublas_wheel_than_torch_pins_installs_the_pin(message, record):
    """torch 2.5.1 pins nvidia-cublas-cu12 12.4.5.8, 12.6.4.1 is installed: the pin is the fix."""
    from errkb.probes.stack import Broken

    broken = Broken(distribution="torch", version="2.5.1", required="nvidia-cublas-cu12",
                    requirement="nvidia-cublas-cu12==12.4.5.8", installed="12.6.4.1")  # fmt: skip
    env = _pinned_env(("nvidia-cublas-cu12", "12.6.4.1"), broken=(broken,))
    found = _raised(RuntimeError(message.removeprefix("RuntimeError: ")), _options(env))
    assert (record, "cuda-wheel-mismatch", 'pip install "nvidia-cublas-cu12==12.4.5.8"') == (
        _record(found),
        _verdict(found),
        _command(found),
    )


@pytest.mark.parametrize(("message", "record"), CUBLAS_ERRORS)
def test_cublas_error_with_the_pinned_wheel_gives_no_command(message, record):
    """The installed cuBLAS wheel is torch's pin: no reinstall is made up, and the note says so."""
    env = _pinned_env(("nvidia-cublas-cu12", "12.4.5.8"))
    found = _raised(RuntimeError(message.removeprefix("RuntimeError: ")), _options(env))
    assert (record, None, True) == (
        _record(found),
        *_noted(found, "nvidia-cublas-cu12 12.4.5.8 is installed"),
    )


def test_nvrtc_of_another_cuda_than_torch_s_pin_is_said_not_reinstalled():
    """NVRTC looked for CUDA 11.1's builtins; torch 2.5.1 pins NVRTC 12.4: another libnvrtc."""
    from errkb.advisors.environment._situations import cuda_wheel

    env = _pinned_env(("nvidia-cuda-nvrtc-cu12", "12.4.127"))
    verdict, facts, notes = cuda_wheel("nvrtc", NVRTC_11_1, env)
    assert (None, "CUDA 11.1", True) == (
        verdict,
        next(f.value for f in facts if f.name == "nvrtc_builtins"),
        "the libnvrtc loaded is another CUDA's" in notes[0],
    )


def test_nvrtc_wheel_without_its_builtins_file_is_reinstalled(tmp_path):
    """The pinned wheel's lib folder lacks libnvrtc-builtins.so.12.4: reinstall the pin."""
    from errkb.advisors.environment._situations import cuda_wheel

    lib = tmp_path / "nvidia" / "cuda_nvrtc" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnvrtc.so.12").write_bytes(b"")
    env = _pinned_env(("nvidia-cuda-nvrtc-cu12", "12.4.127"), folder=str(tmp_path))
    text = NVRTC_11_1.replace("11.1", "12.4")
    verdict, _, _ = cuda_wheel("nvrtc", text, env)
    assert 'pip install --force-reinstall --no-deps "nvidia-cuda-nvrtc-cu12==12.4.127"' == (
        verdict.commands[0] if verdict else None
    )


def test_pasted_nvrtc_names_the_torch_releases_of_its_cuda():
    """Pasted, NVRTC 12.4's builtins: the torch releases that pin NVRTC 12.4 are named."""
    from errkb.advisors.environment._situations import cuda_wheel

    _, _, notes = cuda_wheel("nvrtc", NVRTC_11_1.replace("11.1", "12.4"), None)
    assert "torch 2.5.0, 2.5.1, 2.6.0 pin" in notes[0]


# -- errors of the report corpus that name the environment ---------------------------------


@pytest.mark.parametrize(
    ("text", "record"),
    [
        # https://github.com/pytorch/pytorch/issues/47832 (torch 1.x raised NCCL errors as RuntimeError)
        ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:410, unhandled cuda error, NCCL version 2.4.8", "torch-nccl-error"),
        # https://github.com/pytorch/pytorch/issues/78638
        ("RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1607370120218/work/torch/lib/c10d/ProcessGroupNCCL.cpp:748, internal error, NCCL version 2.7.8", "torch-nccl-error"),
        # https://github.com/ai-forever/ru-dalle/issues/123
        (NVRTC_11_1, "torch-nvrtc-builtins-missing"),
        # https://github.com/vllm-project/vllm/issues/6732
        ("RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)", "vllm-pynccl-error"),
        # https://github.com/vllm-project/vllm/issues/4229
        ("> NameError: name 'vllm_ops' is not defined", "vllm-custom-ops-not-imported"),
        # https://github.com/vllm-project/vllm/issues/1054 (8 GPUs in a cloud container)
        ("RuntimeError: CUDA error: OS call failed or operation not supported on this OS", "torch-cuda-os-call-failed"),
        # https://github.com/facebookresearch/xformers/issues/489 (its title)
        ("NotImplementedError: Could not run xformers::efficient_attention_forward_cutlass", "torch-operator-no-kernel-for-backend"),
        # https://github.com/facebookresearch/xformers/issues/1186
        ("NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:", "xformers-no-operator-for-inputs"),
        # https://github.com/Dao-AILab/flash-attention/issues/374
        ("ModuleNotFoundError: No module named 'flash_attn_cuda'", "flash-attn-compiled-module-missing"),
        # https://github.com/bitsandbytes-foundation/bitsandbytes/issues/733
        ("OSError: <home>/.local/lib/python3.8/site-packages/bitsandbytes/libbitsandbytes.so: cannot open shared object file: No such file or directory", "bitsandbytes-native-library-file-missing"),
        # https://github.com/facebookresearch/xformers/issues/729
        ("RuntimeError: cutlassF: no kernel found to launch! with H100GPU", "xformers-cutlass-no-kernel"),
        # https://github.com/pytorch/pytorch/issues/149984
        ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error", "torch-nccl-error-detail"),
        # https://github.com/pytorch/audio/issues/2020 (the report's line, cut where it was cut)
        ("OSError: /home/nvidia/.local/lib/python3.8/site-packages/torchaudio/_torchaudio.so: u", "torchaudio-extension-built-for-other-torch"),
        # https://github.com/pytorch/audio/issues/1749
        ("ImportError: libtorch_hip.so: cannot open shared object file: No such file or directory", "torch-extension-needs-gpu-build-of-torch"),
        # https://github.com/triton-lang/triton/issues/5570
        ("RuntimeError: 0 active drivers ([]). There should only be one.", "triton-no-active-driver"),
        # https://github.com/facebookresearch/xformers/issues/671
        ("RuntimeError: No such operator xformers_flash::flash_fwd - did you forget to build xformers with `python setup.py develop`?", "xformers-operator-not-built"),
        # https://github.com/facebookresearch/xformers/issues/641 and /804
        ("FileNotFoundError: [Errno 2] No such file or directory: '/home/alpha/.local/lib/python3.10/site-packages/xformers/cpp_lib.json'", "xformers-cpp-lib-json-missing"),
        ("FileNotFoundError: [Errno 2] No such file or directory: '/opt/conda/lib/python3.10/site-packages/xformers/cpp_lib.json'", "xformers-cpp-lib-json-missing"),
        # https://github.com/2noise/ChatTTS/issues/127: a cut line names no file, so no library
        ("FileNotFoundError: [Errno 2] No such file or directory:", "python-file-not-found"),
    ],
)  # fmt: skip
def test_a_reported_environment_error_finds_its_record_with_its_class(text, record):
    """The pasted report, class and all, gets the record (the class rule admits RuntimeError)."""
    found = explain(text, options=Options(probes=False, timeout=60))
    assert record == _record(found)


def test_two_active_triton_drivers_are_not_judged_a_machine_without_cuda():
    """https://github.com/triton-lang/triton/issues/2985: two backends, not a CPU torch."""
    env = environment(
        torch=torch_build("2.13.0+cpu", cuda=None), installed=stack(("torch", "2.13.0+cpu"))
    )
    text = "2 active drivers ([<class 'c.CudaDriver'>, <class 'nvi.CudaDriver'>])."
    found = _raised(RuntimeError(text), _options(env))
    assert ("triton-no-active-driver", None) == (
        _record(found),
        _verdict(found),
    )


#: https://github.com/vllm-project/vllm/issues/7801 (vLLM's pynccl, its traceback's last line)
PYNCCL_SYSTEM = (
    'File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/device_communicators/'
    'pynccl_wrapper.py", line 223, in NCCL_CHECK\n'
    '    raise RuntimeError(f"NCCL error: {error_str}")\n'
    "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
)


def test_vllm_pynccl_system_error_in_a_small_shm_container_gets_the_shm_size():
    """vLLM's own NCCL error, raised live in a 64 MiB /dev/shm container: --shm-size."""
    env = environment(container="docker", shm_bytes=64 << 20, memory_bytes=64 * GIB)
    message = PYNCCL_SYSTEM.rsplit("RuntimeError: ", 1)[1]
    found = _raised(RuntimeError(message), _options(env))
    assert ("vllm-pynccl-error", "shm-small", "docker run --shm-size=32g ...") == (
        _record(found),
        _verdict(found),
        _command(found),
    )


def test_vllm_0_4_custom_ops_without_c_raised_by_real_vllm(tmp_path, monkeypatch):
    """vLLM 0.4.3's own _custom_ops.py (its sdist) without a built _C: the real NameError."""
    import tarfile

    sdist = MINE_CACHE / "vllm-0.4.3.tar.gz"
    if not sdist.exists():
        pytest.skip("needs vLLM 0.4.3's sdist in .mine-cache")
    with tarfile.open(sdist) as archive:
        member = archive.getmember("vllm-0.4.3/vllm/_custom_ops.py")
        archive.extractall(tmp_path, members=[member], filter="data")
    tree = tmp_path / "vllm-0.4.3"
    (tree / "vllm" / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tree))
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    custom_ops = importlib.import_module("vllm._custom_ops")
    with pytest.raises(NameError) as caught:
        custom_ops.rms_norm(None, None, None, 1e-6)
    found = diagnose(caught.value, options=_options(environment()))
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[name]
    assert ("name 'vllm_ops' is not defined", "vllm-custom-ops-not-imported") == (
        str(caught.value),
        _record(found),
    )


def test_an_operator_without_a_kernel_for_the_device_raised_by_real_torch():
    """torch's dispatcher refuses an operator registered only for CUDA, called on the CPU."""
    torch = pytest.importorskip("torch")
    lib = torch.library.Library("errkbtest", "DEF")
    lib.define("fwd(Tensor x) -> Tensor")
    lib.impl("fwd", lambda x: x, "CUDA")
    with pytest.raises(NotImplementedError) as caught:
        torch.ops.errkbtest.fwd(torch.zeros(1))
    found = diagnose(caught.value, options=_options(environment()))
    top = found.findings[0] if found else None
    assert ("torch-operator-no-kernel-for-backend", "errkbtest::fwd", "CPU") == (
        top.record.id if top else None,
        top.match.captures.get("op") if top else None,
        top.match.captures.get("backend") if top else None,
    )


def test_flash_attn_installed_without_its_extension_raised_by_real_flash_attn(
    tmp_path, monkeypatch
):
    """flash-attn 1.0.9's own interface module (its sdist, in a site-packages folder) imports
    flash_attn_cuda, never built: the installed release is built again."""
    import tarfile

    from errkb.advisors.environment.verdicts import rebuild_command

    sdist = MINE_CACHE / "flash_attn-1.0.9.tar.gz"
    if not sdist.exists():
        pytest.skip("needs flash-attn 1.0.9's sdist in .mine-cache")
    site = tmp_path / "site-packages"
    with tarfile.open(sdist) as archive:
        members = [
            m for m in archive.getmembers() if m.name.startswith("flash_attn-1.0.9/flash_attn/")
        ]
        archive.extractall(tmp_path, members=members, filter="data")
    site.mkdir()
    (tmp_path / "flash_attn-1.0.9" / "flash_attn").rename(site / "flash_attn")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "flash_attn", raising=False)
    env = environment(installed=stack(("torch", "2.13.0+cu126"), ("flash-attn", "1.0.9")))
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module("flash_attn.flash_attn_interface")
    found = diagnose(caught.value, options=_options(env))
    for name in [n for n in sys.modules if n == "flash_attn" or n.startswith("flash_attn.")]:
        del sys.modules[name]
    assert ("flash-attn-compiled-module-missing", rebuild_command("flash-attn", "1.0.9")) == (
        _record(found),
        _command(found),
    )


#: https://github.com/facebookresearch/xformers/issues/729 (on an H100)
CUTLASS = "cutlassF: no kernel found to launch!"


def _xformers_env(xformers: str) -> object:
    installed = stack(("torch", "2.5.1+cu121"), ("xformers", xformers))
    return environment(torch=torch_build("2.5.1+cu121", cuda="12.1"), installed=installed)


def test_cutlass_without_a_kernel_on_an_h100_under_xformers_0_0_18_gets_the_release_for_torch():
    """0.0.17-0.0.19 choose no CUTLASS kernel at sm_90: the newest release pinning torch 2.5.1."""
    found = _raised(RuntimeError(CUTLASS), _options(_xformers_env("0.0.18")))
    assert ("xformers-too-old-for-gpu", 'pip install "xformers==0.0.29.post1"') == (
        _verdict(found),
        _command(found),
    )


def test_cutlass_without_a_kernel_under_a_newer_xformers_names_the_inputs():
    """xformers 0.0.28 chooses kernels on an H100: the inputs are the cause, no command."""
    found = _raised(RuntimeError(CUTLASS), _options(_xformers_env("0.0.28")))
    assert (None, True) == _noted(found, "none takes these inputs")


def test_nccl_system_error_detail_line_in_a_small_shm_container_gets_the_shm_size():
    """Only the second line of torch's NCCL error, raised live in a 64 MiB /dev/shm container."""
    env = environment(container="docker", shm_bytes=64 << 20, memory_bytes=64 * GIB)
    detail = NCCL_SHM.split("\n", 1)[1]  # from "ncclSystemError: ..." on
    found = _raised(RuntimeError(detail), _options(env))
    assert ("torch-nccl-error-detail", "docker run --shm-size=32g ...") == (
        _record(found),
        _command(found),
    )


#: vLLM's collect_env of https://github.com/vllm-project/vllm/issues/21028 (its [pip3] list).
COLLECT_ENV_21028 = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "environments"
    / "vllm-21028-collect-env-tail.txt"
)


def test_pasted_cufft_error_beside_a_collect_env_of_another_cuda_build_gets_no_pin():
    """torch 2.7.0+cu128 is not PyPI's build of 2.7.0 (CUDA 12.6): the table's pins do not apply."""
    text = "RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR\n\n" + COLLECT_ENV_21028.read_text()
    assert (None, True) == _noted(explain(text), "no nvidia-cufft-cuNN pin for the pasted torch")


def test_pasted_cufft_error_beside_a_pip_list_with_another_cufft_installs_the_pin():
    """The same paste edited to PyPI's torch 2.6.0 (CUDA 12.4) and a cuFFT wheel it does not pin:
    the table's pin for torch 2.6.0."""
    paste = COLLECT_ENV_21028.read_text().replace(
        "[pip3] torch==2.7.0+cu128", "[pip3] nvidia-cufft-cu12==11.3.0.4\n[pip3] torch==2.6.0+cu124"
    )
    found = explain("RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR\n\n" + paste)
    assert ("cuda-wheel-mismatch", 'pip install "nvidia-cufft-cu12==11.2.1.3"') == (
        _verdict(found),
        _command(found),
    )
