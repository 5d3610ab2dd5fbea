"""The ``device`` fixture of the ReplayRing tests: where the ring lives and how it indexes.

Each test taking it runs three times: on CPU with the host index, on CPU with the device index
(the sync-free code that CUDA rings run, so CI covers it without a GPU), and on CUDA when a GPU
is present. The fixture returns the ``torch.device``; ``ring_helpers.make`` (and
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
