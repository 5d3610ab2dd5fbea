"""Replay ring for off-policy and sequence learners (extra ``torch``; see ``docs/replay.md``).

``import gymcurric`` does not import this package; it needs torch. ``ReplayRing`` (``ring``) is
composed of a ``RingStorage`` (``storage``: the tensors), an index strategy (``indexing``:
``HostIndex`` or ``DeviceIndex``) and the save/load functions of ``persist``; ``specs`` holds
the field layout.
"""

from __future__ import annotations

from gymcurric._optional import import_optional

import_optional("torch", "torch", purpose="by gymcurric.replay")

from gymcurric.replay._checks import RingInvariantError  # noqa: E402
from gymcurric.replay.episodes import EpisodeLoadReport, extend_from_episodes  # noqa: E402
from gymcurric.replay.recorder import RecordToRing  # noqa: E402
from gymcurric.replay.ring import FieldSpec, ReplayRing, Transitions  # noqa: E402

__all__ = [
    "EpisodeLoadReport",
    "FieldSpec",
    "RecordToRing",
    "ReplayRing",
    "RingInvariantError",
    "Transitions",
    "extend_from_episodes",
]
