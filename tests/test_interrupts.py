"""The tests' Ctrl-C (tests/interrupts.py): it lands in the main thread, and leaves SIGALRM be.

It used SIGALRM and ``setitimer``, as pytest-timeout does, and disarmed the timer on its way
out: the rest of the test ran without pytest-timeout's limit.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from tests.interrupts import ctrl_c_after, interrupts

needs_alarm = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no SIGALRM")


@pytest.fixture
def armed() -> Iterator[float]:
    """The interval timer armed: pytest-timeout's, else one of this test's (disarmed after)."""
    own = signal.getitimer(signal.ITIMER_REAL)[0] == 0.0
    previous = signal.getsignal(signal.SIGALRM)
    if own:
        signal.signal(signal.SIGALRM, _fail)
        signal.setitimer(signal.ITIMER_REAL, 600.0)
    try:
        yield signal.getitimer(signal.ITIMER_REAL)[0]
    finally:
        if own:
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            signal.signal(signal.SIGALRM, previous)


def _fail(signum: int, frame: object) -> None:
    pytest.fail("this test's alarm went off")


@needs_alarm
def test_the_alarm_is_still_armed_and_its_handler_kept_after_a_ctrl_c(armed):
    handler = signal.getsignal(signal.SIGALRM)
    with ctrl_c_after(0.2), pytest.raises(KeyboardInterrupt):
        threading.Event().wait(60.0)
    left = signal.getitimer(signal.ITIMER_REAL)[0]
    assert 0.0 < left <= armed  # was 0.0: disarmed
    assert signal.getsignal(signal.SIGALRM) is handler


@pytest.mark.parametrize("call", ["poll", "lock", "join"])
def test_the_ctrl_c_interrupts_a_blocking_call_of_the_main_thread(call):
    # a SIGINT to the process may be taken by another thread, leaving the main thread blocked
    read, write = os.pipe()
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait, daemon=True)
    busy.start()
    try:
        with ctrl_c_after(0.2), pytest.raises(KeyboardInterrupt):
            if call == "poll":
                select.select([read], [], [], 60.0)
            elif call == "lock":
                threading.Event().wait(60.0)
            else:
                busy.join(60.0)
    finally:
        stop.set()
        os.close(read)
        os.close(write)


def test_python_s_sigint_handler_is_installed_inside_and_restored_after():
    def mine(signum: int, frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGINT, mine)
    try:
        with interrupts():
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_not_sent_by_the_end_is_cancelled():
    with interrupts() as sent:
        sent.after(0.3)
    threading.Event().wait(0.6)  # no KeyboardInterrupt here
    assert not any(timer.is_alive() for timer in sent.timers)


def test_a_ctrl_c_sent_as_the_block_ends_stays_in_it_and_the_handler_is_restored(monkeypatch):
    # a timer past its wait when the block ended sent its SIGINT while interrupts() joined it:
    # the KeyboardInterrupt came out of the with block (out of a test, it ends pytest's whole
    # run) and the handler was not restored
    sending = threading.Event()
    kill = signal.pthread_kill

    def late_kill(thread_id: int, signum: int) -> None:
        sending.set()
        time.sleep(0.3)  # the block ends meanwhile
        kill(thread_id, signum)

    def mine(signum: int, frame: object) -> None:
        pass

    monkeypatch.setattr(signal, "pthread_kill", late_kill)
    previous = signal.signal(signal.SIGINT, mine)
    try:
        try:
            with interrupts() as sent:
                sent.after(0.0)
                assert sending.wait(10.0)
        except KeyboardInterrupt:
            pytest.fail("the Ctrl-C sent as the block ended came out of it")
        assert signal.getsignal(signal.SIGINT) is mine
        assert not any(timer.is_alive() for timer in sent.timers)
    finally:
        signal.signal(signal.SIGINT, previous)
