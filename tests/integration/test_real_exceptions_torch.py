"""Real PyTorch exceptions, raised by the installed CPU build, must be recognised by errkb's torch records."""

from __future__ import annotations

import io
import pickle

import pytest

torch = pytest.importorskip("torch")

from helpers import top_match  # noqa: E402


class _NotAllowlisted:
    """A class that torch.load(weights_only=True) refuses to rebuild."""


def test_matmul_shape_mismatch() -> None:
    """Multiplying 2x3 by 4x5 matrices is recognised, with all four sizes captured."""
    with pytest.raises(RuntimeError) as info:
        torch.randn(2, 3) @ torch.randn(4, 5)
    top = top_match(info.value)
    assert top.record.id == "torch-mat1-mat2-shapes-cannot-be-multiplied"
    assert top.captures["mat1_rows"] == 2
    assert top.captures["mat1_cols"] == 3
    assert top.captures["mat2_rows"] == 4
    assert top.captures["mat2_cols"] == 5


def test_linear_wrong_in_features() -> None:
    """An nn.Linear fed the wrong feature count gives the matmul shape record."""
    with pytest.raises(RuntimeError) as info:
        torch.nn.Linear(512, 10)(torch.randn(8, 2048))
    top = top_match(info.value)
    assert top.record.id == "torch-mat1-mat2-shapes-cannot-be-multiplied"
    assert top.captures["mat1_cols"] == 2048
    assert top.captures["mat2_rows"] == 512


def test_view_invalid_shape() -> None:
    """view() to a shape with the wrong element count is recognised, with the element count captured."""
    with pytest.raises(RuntimeError) as info:
        torch.randn(2, 3).view(4, 2)
    top = top_match(info.value)
    assert top.record.id == "torch-shape-invalid-for-input-size"
    assert top.captures["numel"] == 6


def test_broadcast_mismatch() -> None:
    """Adding tensors that cannot broadcast is recognised, with both sizes and the dimension captured."""
    with pytest.raises(RuntimeError) as info:
        torch.randn(2, 3) + torch.randn(4, 3)
    top = top_match(info.value)
    assert top.record.id == "torch-size-mismatch-non-singleton-dimension"
    assert (top.captures["size_a"], top.captures["size_b"], top.captures["dim"]) == (2, 4, 0)


def test_cpu_mm_dtype_mismatch() -> None:
    """float32 @ float16 on CPU gives the m1/m2 dtype record."""
    with pytest.raises(RuntimeError) as info:
        torch.randn(2, 3) @ torch.randn(3, 4, dtype=torch.float16)
    top = top_match(info.value)
    assert top.record.id == "torch-mm-operands-dtype-mismatch"
    assert top.captures["m2_dtype"] == "c10::Half"


def test_linear_dtype_mismatch() -> None:
    """A float16 input into a float32 nn.Linear gives the mat1/mat2 dtype record."""
    with pytest.raises(RuntimeError) as info:
        torch.nn.Linear(3, 4)(torch.randn(2, 3, dtype=torch.float16))
    top = top_match(info.value)
    assert top.record.id == "torch-mat1-mat2-dtype-mismatch"
    assert (top.captures["first_dtype"], top.captures["second_dtype"]) == ("Half", "Float")


def test_bmm_expected_scalar_type() -> None:
    """bmm of float32 and float16 batches gives the expected-scalar-type record."""
    with pytest.raises(RuntimeError) as info:
        torch.bmm(torch.randn(2, 3, 3), torch.randn(2, 3, 3, dtype=torch.float16))
    top = top_match(info.value)
    assert top.record.id == "torch-expected-scalar-type"
    assert (top.captures["expected_dtype"], top.captures["found_dtype"]) == ("Float", "Half")


def test_conv_input_bias_type_mismatch() -> None:
    """A float64 image into a float32 Conv2d gives the input/parameter type record."""
    with pytest.raises(RuntimeError) as info:
        torch.nn.Conv2d(3, 4, 3)(torch.randn(1, 3, 8, 8, dtype=torch.float64))
    top = top_match(info.value)
    assert top.record.id == "torch-input-weight-type-mismatch"
    assert top.captures["input_type"] == "double"


def test_backward_without_grad() -> None:
    """backward() on a tensor outside any graph is recognised."""
    with pytest.raises(RuntimeError) as info:
        torch.randn(3).sum().backward()
    assert top_match(info.value).record.id == "torch-element-does-not-require-grad"


def test_backward_twice() -> None:
    """A second backward through a freed graph is recognised."""
    x = torch.randn(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as info:
        y.backward()
    assert top_match(info.value).record.id == "torch-backward-through-graph-second-time"


def test_inplace_modification_of_saved_tensor() -> None:
    """Modifying a sigmoid output in place before backward is recognised, with the versions captured."""
    x = torch.randn(3, requires_grad=True)
    y = x.sigmoid()
    y.mul_(2)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    top = top_match(info.value)
    assert top.record.id == "torch-inplace-modified-variable-needed-for-gradient"
    assert (top.captures["current_version"], top.captures["saved_version"]) == (1, 0)


def test_load_state_dict_size_mismatch() -> None:
    """Loading a 5-output Linear's weights into a 4-output Linear is recognised, with the key captured."""
    with pytest.raises(RuntimeError) as info:
        torch.nn.Linear(3, 4).load_state_dict(torch.nn.Linear(3, 5).state_dict())
    top = top_match(info.value)
    assert top.record.id == "torch-load-state-dict-size-mismatch"
    assert top.captures["key"] == "weight"


def test_load_state_dict_missing_and_unexpected_keys() -> None:
    """A DataParallel-style 'module.' prefix gives the missing/unexpected keys record."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 4))
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(
            {"module.0.weight": torch.randn(4, 3), "module.0.bias": torch.randn(4)}
        )
    top = top_match(info.value)
    assert top.record.id == "torch-load-state-dict-missing-unexpected-keys"
    assert top.captures["model_class"] == "Sequential"


def test_weights_only_unsupported_global() -> None:
    """torch.load(weights_only=True) of a pickled custom class is recognised, with the global's name captured."""
    buf = io.BytesIO()
    torch.save({"meta": _NotAllowlisted()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError) as info:
        torch.load(buf, weights_only=True)
    top = top_match(info.value)
    assert top.record.id == "torch-weights-only-unsupported-global"
    assert top.captures["global_name"].endswith("_NotAllowlisted")


def test_deserialize_cuda_checkpoint_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a checkpoint whose storages are tagged cuda:0 on a CPU-only build is recognised."""
    from torch import serialization

    if torch.cuda.is_available():
        pytest.skip("needs a machine where CUDA is unavailable")
    buf = io.BytesIO()
    with monkeypatch.context() as patch:
        patch.setattr(serialization, "location_tag", lambda storage: "cuda:0")
        torch.save({"w": torch.zeros(2)}, buf)
    buf.seek(0)
    with pytest.raises(RuntimeError) as info:
        torch.load(buf, weights_only=True)
    top = top_match(info.value)
    assert top.record.id == "torch-deserialize-cuda-unavailable"
    assert top.captures["backend"] == "cuda"


def test_cuda_on_cpu_build() -> None:
    """Using CUDA with a CPU-only PyTorch build is recognised as an AssertionError record."""
    if torch.version.cuda is not None:
        pytest.skip("needs a CPU-only PyTorch build")
    with pytest.raises(AssertionError) as info:
        torch.zeros(1).cuda()
    assert top_match(info.value).record.id == "torch-torch-not-compiled-with-cuda"


def test_distributed_default_group_not_initialized() -> None:
    """torch.distributed.get_rank() without init_process_group is recognised."""
    import torch.distributed as dist

    if not dist.is_available() or dist.is_initialized():
        pytest.skip("needs torch.distributed available and not initialised")
    with pytest.raises(ValueError) as info:
        dist.get_rank()
    assert top_match(info.value).record.id == "torch-default-process-group-not-initialized"


def test_device_mismatch_under_fake_tensors() -> None:
    """A cuda/cpu device mismatch traced with FakeTensorMode is recognised, with both devices captured."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with pytest.raises(RuntimeError) as info, FakeTensorMode():
        torch.empty(2, 3, device="cuda") @ torch.empty(3, 2)
    top = top_match(info.value)
    assert top.record.id == "torch-tensors-on-different-devices"
    assert {top.captures["first_device"], top.captures["second_device"]} == {"cuda:0", "cpu"}


def test_cpu_allocator_failure() -> None:
    """A 2**62-byte host allocation fails immediately and is recognised, with the byte count captured."""
    with pytest.raises(RuntimeError) as info:
        torch.empty(2**62, dtype=torch.uint8)
    top = top_match(info.value)
    assert top.record.id == "torch-cpu-allocator-out-of-memory"
    assert top.captures["requested_bytes"] == 2**62
