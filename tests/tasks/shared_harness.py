"""Parent-side helpers of the shared-backend tests: a shared curriculum, worker processes.

Shared by ``test_shared_backend.py`` and ``test_transport.py``; the functions the workers run
are in ``shared_workers.py`` (which spawn children import, so it stays small).
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

from gymcurric.tasks import Curriculum


def shared_curriculum(space: Any, **kw: Any) -> Curriculum:
    """A curriculum over ``space`` on the shared-memory backend."""
    return Curriculum(space, backend="shared", **kw)


def start_process(method: str, target: Any, *args: Any) -> Any:
    """A started daemon process of start method ``method`` running ``target(*args)``."""
    p = mp.get_context(method).Process(target=target, args=args, daemon=True)
    p.start()
    return p


def worker_result(q: Any, timeout: float = 60) -> Any:
    """The next result a worker put on ``q``; a worker's exception raises an AssertionError."""
    msg = q.get(timeout=timeout)
    if msg[0] == "error":
        raise AssertionError(f"worker raised {msg[1]}: {msg[2]}")
    return msg[1]
