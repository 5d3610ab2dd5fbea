"""``ReplayRing``'s ``device``: one torch does not know, or one this machine lacks, is a
ConfigError naming it (torch's own errors came from the first allocation, deep inside)."""

import pytest
import torch

from gymcurric.errors import ConfigError
from gymcurric.replay import ReplayRing

FIELDS = {"obs": ((2,), torch.float32), "action": ((), torch.int64)}


@pytest.mark.parametrize(
    ("device", "shown", "why"),
    [
        ("gpu", "'gpu'", "not a torch device"),
        ("cuda:-1", "'cuda:-1'", "not a torch device"),
        (None, "None", "not a torch device"),
        (1.5, "1.5", "not a torch device"),
    ],
)
def test_a_device_torch_does_not_know_is_named(device, shown, why):
    with pytest.raises(ConfigError, match="'device'") as info:
        ReplayRing(4, 1, FIELDS, device)
    assert f": {shown} (" in str(info.value) and why in str(info.value)
    assert len(str(info.value)) < 300  # torch's list of backends is cut


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda", 1)])
def test_cuda_on_a_machine_without_it_is_named(device, monkeypatch):
    # was AssertionError: Torch not compiled with CUDA enabled (from torch.cuda.current_device)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"'device'.*CUDA is not available here.*use 'cpu'"):
        ReplayRing(4, 1, FIELDS, device)


def test_a_cuda_index_past_the_machines_devices_is_named(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigError, match=r"'cuda:1'.*has 1 CUDA device"):
        ReplayRing(4, 1, FIELDS, "cuda:1")


def test_mps_on_a_machine_without_it_is_named(monkeypatch):
    # was NotImplementedError: Could not run 'aten::empty.memory_format' ... 'MPS' backend
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"'mps'.*MPS is not available here"):
        ReplayRing(4, 1, FIELDS, "mps")


@pytest.mark.parametrize("device", ["cpu", "cpu:0", torch.device("cpu")])
def test_the_cpu_is_taken_as_before(device):
    assert ReplayRing(4, 1, FIELDS, device).device == torch.device("cpu")


@pytest.mark.parametrize("device", ["xpu", "vulkan", "hpu"])
def test_another_backend_torch_cannot_allocate_on_is_named(device):
    # 75d96d5 asked CUDA and MPS only: 'xpu' was AssertionError ('Torch not compiled with XPU
    # enabled'), 'vulkan' NotImplementedError, 'hpu' ModuleNotFoundError from the allocation
    try:
        torch.empty(0, device=device)
    except Exception:  # whatever torch raises where the backend is missing
        pass
    else:
        pytest.skip(f"this machine has {device}")
    with pytest.raises(ConfigError, match=rf"'device': '{device}' \(torch cannot allocate on it"):
        ReplayRing(4, 1, FIELDS, device)
    assert ReplayRing(4, 1, FIELDS, "cpu:0").device == torch.device("cpu")


@pytest.mark.parametrize("device", [0, 1])
def test_an_int_is_named_as_an_accelerator_index_where_there_is_none(device):
    # torch reads 0 as the accelerator's index 0 (cuda:0); it was called 'not a torch device'
    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip("this machine has an accelerator")
    with pytest.raises(ConfigError, match="an accelerator's index, but this machine has none"):
        ReplayRing(4, 1, FIELDS, device)
