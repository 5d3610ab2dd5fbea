"""A Ctrl-C for tests, sent by a timer thread: pytest-timeout's alarm is left alone.

pytest-timeout (``timeout`` in pyproject.toml; its ``signal`` method, where there is SIGALRM)
arms SIGALRM with ``setitimer`` for each test. A test that took SIGALRM over for its own
interrupt and disarmed the timer on its way out left the rest of the test without that limit
(a hang there waited for ever). Here a :class:`threading.Timer` sends SIGINT to the main
thread (``signal.pthread_kill``: its blocking call, a ``poll``, a ``join``, a lock, is
interrupted, which a SIGINT to the process, taken by another thread, may not do), under
Python's default SIGINT handler for the duration.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Interrupts", "ctrl_c_after", "interrupts"]


class Interrupts:
    """The Ctrl-Cs that :func:`interrupts` sends, each arranged by :meth:`after`."""

    def __init__(self) -> None:
        self.timers: list[threading.Timer] = []

    def after(self, seconds: float) -> None:
        """A Ctrl-C (``KeyboardInterrupt``) in the main thread ``seconds`` from now."""
        main = threading.main_thread().ident
        timer = threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGINT))
        timer.daemon = True
        self.timers.append(timer)
        timer.start()

    def cancel(self) -> None:
        """Cancel those not sent yet (and wait for any being sent)."""
        for timer in self.timers:
            timer.cancel()
        for timer in self.timers:
            timer.join()

    def end(self, previous: Any) -> None:
        """Cancel those not sent and restore ``previous``; one sent as the block ends is dropped.

        A timer past its wait when the block ended sends its SIGINT while it is joined, or just
        before: Python's handler raises ``KeyboardInterrupt`` in the join, or in
        ``signal.signal``, which runs the handlers of pending signals before it changes one.
        That Ctrl-C was meant for the block, which is over (out of the test, it would end
        pytest's whole run): it is dropped (as is a Ctrl-C typed in that instant), and the
        handler restored all the same.
        """
        while True:
            try:
                self.cancel()
                signal.signal(signal.SIGINT, previous)
                return
            except KeyboardInterrupt:
                continue


@contextmanager
def interrupts() -> Iterator[Interrupts]:
    """Python's default SIGINT handler while inside; Ctrl-Cs not sent by the end are cancelled.

    One sent as the block ends (its timer past its wait) is dropped: :meth:`Interrupts.end`.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent = Interrupts()
    try:
        yield sent
    finally:
        sent.end(previous)


@contextmanager
def ctrl_c_after(seconds: float) -> Iterator[None]:
    """A Ctrl-C (``KeyboardInterrupt``) in the main thread ``seconds`` after entering."""
    with interrupts() as sent:
        sent.after(seconds)
        yield
