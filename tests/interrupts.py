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
            timer.join()


@contextmanager
def interrupts() -> Iterator[Interrupts]:
    """Python's default SIGINT handler while inside; Ctrl-Cs not sent by the end are cancelled."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent = Interrupts()
    try:
        yield sent
    finally:
        sent.cancel()
        signal.signal(signal.SIGINT, previous)


@contextmanager
def ctrl_c_after(seconds: float) -> Iterator[None]:
    """A Ctrl-C (``KeyboardInterrupt``) in the main thread ``seconds`` after entering."""
    with interrupts() as sent:
        sent.after(seconds)
        yield
