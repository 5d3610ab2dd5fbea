"""The ``device`` fixture of the ReplayRing tests: where the ring lives and how it indexes.

Each test taking it runs on CPU with the host index, and on CUDA (with the device index) when a
GPU is present. The fixture returns the ``torch.device``; ``ring_helpers.make`` (and
``ring_helpers.strategy()``) give rings of that test's index strategy.
"""

import pytest
import torch

from tests.replay import ring_helpers
from tests.replay.ring_helpers import PLACEMENTS


@pytest.fixture(params=PLACEMENTS)
def device(request, monkeypatch):
    name, index_strategy = request.param
    monkeypatch.setattr(ring_helpers, "INDEX_STRATEGY", index_strategy)
    return torch.device(name)
