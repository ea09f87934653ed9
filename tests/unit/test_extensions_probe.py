"""errkb.probes.extensions: compiled files loaded in child interpreters, failures reported.

The extensions are real shared libraries built here with the C compiler: one that references a
symbol of torch's C++ library that is not there (a real ``undefined symbol`` from the dynamic
loader), one that crashes the interpreter as it loads, one that hangs, one that loads.
"""

from __future__ import annotations

import sysconfig

from environments import compile_library, write_dist

from errkb.probes.extensions import compiled_files, load_extensions
from errkb.probes.stack import read_distributions

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
UNDEFINED = """
extern void _ZN3c104cuda9SetDeviceEa(signed char);
void *PyInit_flash_attn_2_cuda(void) { _ZN3c104cuda9SetDeviceEa(0); return 0; }
"""
CRASH = """
#include <signal.h>
__attribute__((constructor)) static void boom(void) { raise(SIGSEGV); }
"""
HANG = """
#include <unistd.h>
__attribute__((constructor)) static void wait_forever(void) { for (;;) pause(); }
"""
FINE = "int bnb_ok(void) { return 1; }\n"


def _dist(tmp_path, name, version, files):
    built = {
        rel: compile_library(src, tmp_path / "build" / rel.replace("/", "_"))
        for rel, src in files.items()
    }
    site = tmp_path / "site"
    write_dist(site, name, version, files=built)
    return read_distributions([str(site)])[name.replace("-", "_")]


def test_an_undefined_torch_symbol_is_the_loader_s_own_message(tmp_path):
    """flash-attn's binary references c10::cuda::SetDevice, absent here: the real ImportError."""
    dist = _dist(tmp_path, "flash-attn", "2.7.4.post1", {f"flash_attn_2_cuda{SUFFIX}": UNDEFINED})
    (ext,) = load_extensions([dist], torch_installed=False, torch_cuda=None)
    assert ("flash_attn_2_cuda", True) == (
        ext.name,
        ext.error is not None and ext.error.endswith("undefined symbol: _ZN3c104cuda9SetDeviceEa"),
    )


def test_a_crash_while_loading_is_a_fact(tmp_path):
    """An extension that kills the interpreter is reported with the signal, not errkb's crash."""
    dist = _dist(tmp_path, "apex", "0.1", {f"amp_C{SUFFIX}": CRASH})
    (ext,) = load_extensions([dist], torch_installed=False, torch_cuda=None)
    assert "loading it crashed the interpreter (SIGSEGV)" == ext.error


def test_a_hang_while_loading_is_stopped_at_the_bound(tmp_path):
    """An extension that never returns is stopped after the time bound and said so."""
    dist = _dist(tmp_path, "deepspeed", "0.15.0", {f"deepspeed/ops/adam/cpu_adam{SUFFIX}": HANG})
    (ext,) = load_extensions([dist], torch_installed=False, torch_cuda=None, timeout=3)
    assert "loading it did not finish within 3s (a hang)" == ext.error


def test_bitsandbytes_loads_the_library_for_torch_s_cuda(tmp_path):
    """Of bitsandbytes' native libraries, the one for torch's CUDA 12.6 is tried, and loads."""
    files = {
        "bitsandbytes/libbitsandbytes_cuda126.so": FINE,
        "bitsandbytes/libbitsandbytes_cuda118.so": FINE,
        "bitsandbytes/libbitsandbytes_cpu.so": FINE,
    }
    dist = _dist(tmp_path, "bitsandbytes", "0.45.0", files)
    (ext,) = load_extensions([dist], torch_installed=False, torch_cuda="12.6")
    assert ("library", "libbitsandbytes_cuda126.so", None) == (ext.kind, ext.name, ext.error)


def test_bitsandbytes_without_a_library_for_torch_s_cuda_reports_its_cpu_library(tmp_path):
    """No libbitsandbytes_cuda124 among its files: the CPU library (0.43.1-0.45.5's fallback)
    is the one reported, and it loads."""
    files = {
        "bitsandbytes/libbitsandbytes_cpu.so": FINE,
        "bitsandbytes/libbitsandbytes_cuda118.so": FINE,
    }
    dist = _dist(tmp_path, "bitsandbytes", "0.45.5", files)
    (ext,) = load_extensions([dist], torch_installed=False, torch_cuda="12.4")
    assert ("library", "libbitsandbytes_cpu.so", None) == (ext.kind, ext.name, ext.error)


def test_module_names_follow_the_record(tmp_path):
    """A tagged or plain .so is a module named by its path; lib*.so is not a module."""
    files = {f"vllm/_C{'.abi3.so'}": FINE, "xformers_like/_C.so": FINE, "vllm/libfoo.so": FINE}
    dist = _dist(tmp_path, "vllm", "0.6.3", files)
    assert ["vllm._C", "xformers_like._C"] == [name for _, name, _ in compiled_files(dist, None)]
