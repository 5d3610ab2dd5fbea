"""The main process's end of a :class:`~gymcurric.integrations.sb3.CheckedSubprocVecEnv` worker.

:class:`Remote` waits for a worker's answer on its pipe and its process sentinel, with the vector
env's time limit, and turns what went wrong (a worker's ``Failure``, a death, a hang) into the
error that names the sub-env. The worker's side is in ``_subproc_worker``; the vector env,
which owns one :class:`Remote` per worker, in ``checked_vec_env``.
"""

from __future__ import annotations

import gc
import select
import signal
import weakref
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

from gymcurric.errors import GymcurricError, SubEnvCallError, SubEnvError, WorkerError
from gymcurric.integrations.sb3._subproc_worker import CALLS, Failure
from gymcurric.wrappers._sub_envs import error_text, load_pickled_error

if TYPE_CHECKING:
    from gymcurric.integrations.sb3.checked_vec_env import CheckedSubprocVecEnv

__all__ = ["Remote", "call_error", "command_name", "how_it_ended", "sub_env_error"]


def sub_env_error(
    index: int,
    command: str,
    error_type: str,
    message: str,
    text: str,
    original: BaseException | None,
    in_worker: bool,
) -> Exception:
    """The error to raise for sub-env ``index``: ``original`` itself where it is gymcurric's."""
    if isinstance(original, GymcurricError):
        where = "in its worker process" if in_worker else "in this process"
        note = f"sub-env {index}: {command} raised this ({error_type}) {where}; the vector "
        note += "env cannot go on"
        if in_worker and text:
            note += f". In the sub-env's process:\n{text.rstrip()}"
        original.add_note(note)
        return original
    error = SubEnvError(index, command, error_type, message, text, in_worker)
    if original is not None:
        error.__cause__ = original
    return error


def call_error(
    index: int,
    message: Any,
    error_type: str,
    text: str,
    worker_traceback: str,
    original: BaseException | None,
    stage: str,
) -> Exception:
    """The error of a call (``message``, one of ``CALLS``) that failed in sub-env ``index``.

    Its worker goes on: ``original`` itself with a note where it is gymcurric's, else a
    :class:`~gymcurric.errors.SubEnvCallError` naming the method (``describe`` for
    ``env_method('describe')``, else the command: ``get_attr('task_id')``).
    """
    cmd, data = message
    method = data[0] if cmd == "env_method" else command_name(message)
    if stage == "call" and isinstance(original, GymcurricError):
        call = f"{method}()" if cmd == "env_method" else method
        note = f"raised by {call} of sub-env {index}; its worker goes on"
        if worker_traceback:
            note += f". In the sub-env's process:\n{worker_traceback.rstrip()}"
        original.add_note(note)
        return original
    error = SubEnvCallError(index, method, error_type, text, worker_traceback, True, stage)
    if original is not None:
        error.__cause__ = original
    return error


def command_name(message: Any) -> str:
    """``step()``, ``env_method('describe')``: what a command sent to a worker asks."""
    try:
        cmd, data = message
        if cmd in ("env_method", "set_attr"):
            return f"{cmd}({data[0]!r})"
        return f"{cmd}({data!r})" if cmd in ("get_attr", "has_attr") else f"{cmd}()"
    except (TypeError, ValueError, IndexError, KeyError):
        return "a command"


def how_it_ended(process: Any) -> str:
    """How a worker process ended (waiting a moment for its exit code)."""
    process.join(1.0)
    code = process.exitcode
    if code is None:
        return "it closed its pipe"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"it exited with code {code}"


class Remote:
    """The main process's end of one worker's pipe, as SB3's methods use it (send, recv).

    ``pending``: a command was sent whose answer is unread (sending another then is an error:
    its answer would be read as the new command's, after a Ctrl-C for example, which also
    breaks the vector env where it ends the wait for an answer); ``close()`` reads those answers
    only, not every worker's as SB3's does (after a ``step_wait`` interrupted part way, it
    waited for answers already read). ``in_sync``: False once a ``recv`` was interrupted while
    it read a message (the rest of it is unread: nothing more is read from the pipe), or a
    ``send`` while it wrote one (close() sends nothing more: the worker reads the pipe's end).
    ``hung``: its worker, alive, did not answer in time (``timeout``, ``build_timeout``), or
    was still building its env when the vector env's construction failed: ``close()``
    terminates it at once.
    ``wait_ms`` / ``wait_s``: how long ``recv`` waits (None: no limit): the vector env's
    ``build_timeout`` for the worker's first answer, which waits for it to start and build its
    env (``built``: that answer came), its ``timeout`` for the others.
    """

    def __init__(self, venv: CheckedSubprocVecEnv, index: int, conn: Connection, process: Any):
        # a proxy, not the vector env: no reference cycle (venv.remotes <-> Remote.venv), so an
        # env no longer referenced is freed at once, not by the garbage collector, and its pipe
        # ends with it (its workers, unclosed, read their pipe's end and exit, as SB3's do)
        self.venv = weakref.proxy(venv)
        self.index, self.conn, self.process = index, conn, process
        self.message: Any = None  # the last command sent (named on an error only)
        self.pending = False
        self.in_sync = True
        self.hung = False
        self.built = False
        self.wait_ms: int | None = venv.build_wait_ms
        self.wait_s: float | None = venv.build_timeout
        self.fd = conn.fileno()
        # the sentinel too: a worker's death ends the wait, whoever holds its pipe open; a
        # poll object (one call per wait) where there is one, else multiprocessing's wait
        self.poller = select.poll() if hasattr(select, "poll") else None
        if self.poller is not None:
            self.poller.register(self.fd, select.POLLIN)
            self.poller.register(process.sentinel, select.POLLIN)

    @property
    def command(self) -> str:
        """What the last command asked, e.g. ``step()`` (``starting`` before any)."""
        return "starting" if self.message is None else command_name(self.message)

    def send(self, message: Any) -> None:
        venv = self.venv
        if venv.failure is not None or venv.closed:
            venv.check_usable()
        if self.pending:  # a wait interrupted between two reads: read now, it would pass for
            # this command's answer
            raise venv.broken(self._undefined(f"its answer to {self.command} is unread"))
        self.message = message
        try:
            self.conn.send(message)
        except OSError as exc:  # BrokenPipeError, ConnectionResetError: the worker is gone
            raise self._died() from exc
        except BaseException as exc:
            if isinstance(exc, Exception):  # it does not pickle: nothing was sent
                raise
            self.in_sync = False  # Ctrl-C: the command may be half sent
            venv.broken(self._undefined(f"interrupted sending it {self.command}"))
            raise
        self.pending = True

    def recv(self) -> Any:
        venv = self.venv
        if venv.failure is not None or venv.closed:
            venv.check_usable()
        ready: list[Any]
        try:
            if self.poller is not None:
                ready = self.poller.poll(self.wait_ms)
                died = len(ready) == 1 and ready[0][0] != self.fd
            else:
                ready = wait([self.conn, self.process.sentinel], self.wait_s)
                died = self.conn not in ready
        except BaseException:  # Ctrl-C: the answer comes later, unread (close() reads none)
            what = f"interrupted while waiting for its answer to {self.command}"
            venv.broken(self._undefined(what))
            raise
        if not ready:  # neither an answer nor the worker's end within the timeout
            raise self._hung()
        if died and not self.conn.poll(0):
            raise self._died()
        try:
            message = self.conn.recv()
        except (EOFError, OSError) as exc:
            raise self._died() from exc
        except Exception as exc:  # the answer came whole but does not unpickle here
            self.pending = False
            kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
            if self.message[0] in CALLS:  # read whole: the pipe is in step, the worker goes on
                error = call_error(self.index, self.message, kind, error_text(exc), "", exc, "load")
                raise error from exc
            what = f"loading its answer to {self.command} in the main process"
            raise venv.broken(SubEnvError(self.index, what, kind, error_text(exc))) from exc
        except BaseException:  # Ctrl-C part way through a message: the pipe is out of step
            self.in_sync = False
            venv.broken(WorkerError(f"sub-env {self.index}: interrupted reading its answer"))
            raise
        self.pending = False
        self.built = True
        self.wait_ms, self.wait_s = venv.wait_ms, venv.timeout  # after the first answer
        if isinstance(message, Failure):
            original = load_pickled_error(message.blob)
            if message.goes_on and self.message[0] in CALLS:
                raise call_error(
                    self.index,
                    self.message,
                    message.error_type,
                    message.message,
                    message.traceback,
                    original,
                    message.stage,
                )
            command = message.command
            if message.stage == "args":  # a step's or reset's: the others' answers are unread
                command = f"{self.command} (its arguments do not load in its worker)"
            error = sub_env_error(
                self.index,
                command,
                message.error_type,
                message.message,
                message.traceback,
                original,
                True,
            )
            raise self.venv.broken(error)
        return message

    def _hung(self) -> Exception:
        self.hung = True
        command, what = self.command, "hung?"
        if not self.built:  # its first answer: the worker had yet to build its env
            command, what = "building the env", "hung while building its env?"
        what = f"no reply within {self.wait_s:g} s (the worker is alive: {what})"
        error = SubEnvError(self.index, command, None, what, timeout=self.wait_s)
        return self.venv.broken(error)

    def _undefined(self, what: str) -> WorkerError:
        """The error for a command and answer out of step (an interrupted wait or send)."""
        return WorkerError(
            f"sub-env {self.index}: {what}; the vector env is in an undefined state (a later "
            "answer would be read as another command's): close it"
        )

    def _died(self) -> Exception:
        pid = self.process.pid
        how = f"{how_it_ended(self.process)} (pid {pid})"
        command = self.command
        if not self.built:  # no answer yet: it died building its env (in its factory), named
            # as a hang there is, not by the constructor's question (get_spaces, or without a
            # build_timeout VecEnv.__init__'s get_attr('render_mode') to sub-envs 1..)
            command = "building the env"
        return self.venv.broken(SubEnvError(self.index, command, None, how))

    @property
    def owns_fd(self) -> bool:
        """Whether its pipe fd is still its own: closed neither by ``close()`` nor the collector.

        ``Connection.__del__`` closes the fd but leaves the connection looking open (its
        ``closed`` False): it runs when the garbage collector collects a reference cycle that
        holds the vector env, possibly before a finalizer (a user's ``__del__``) calls its
        ``close()``. The fd's number may be another file's by then: it is neither read,
        written nor closed again.
        """
        return not self.conn.closed and not gc.is_finalized(self.conn)

    def close(self) -> None:
        """Close its pipe fd, where it still owns it (:attr:`owns_fd`)."""
        if self.owns_fd:
            self.conn.close()
