"""The ``device`` fixture of the ReplayRing tests: CPU always, CUDA when a GPU is present."""

import pytest
import torch

from tests.replay.ring_helpers import DEVICES


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)
