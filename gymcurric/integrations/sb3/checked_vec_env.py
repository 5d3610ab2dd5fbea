"""SB3 vector envs in which a failing sub-env ends the run with an error naming it, never a hang.

SB3's ``SubprocVecEnv`` worker exits on an exception raised by its env: the traceback goes to
the worker's stderr, the main process reads ``EOFError`` from the pipe and learns neither which
sub-env failed nor why. And it can wait for ever:

- ``close()`` after a ``step_wait`` that raised waits for an answer from every worker (its
  ``waiting`` flag stays set), also from those whose answer it has already read: they wait for
  their next command, the main process for their answer. ``gymcurric train`` closes its envs
  whatever happens, so a worker's error hung the run.
- under the ``fork`` start method each worker inherits the pipe ends of the workers started
  after it: a worker that dies (an exception, a ``SIGKILL``, the OOM killer) leaves its pipe
  open in a sibling, and ``recv`` never sees its end.

:class:`CheckedSubprocVecEnv` is SB3's vector env with its own worker loop and pipe ends. The
worker (``_subproc_worker``) catches what its env raises (in ``step``, ``reset``,
``env_method``, ..., or while the env is built) and sends it back: type, message, traceback
and, where it pickles, the exception. The main process waits on each pipe and on its
worker's process sentinel (``select.poll``, else ``multiprocessing.connection.wait``), so a
worker's death ends the wait, whoever holds a copy of its pipe. Either is raised as a
:class:`~gymcurric.errors.SubEnvError` naming the sub-env's index, what it was doing and the
error (or the signal / exit code); a :class:`~gymcurric.errors.GymcurricError` is raised as
itself, with a note naming the sub-env.
The vector env is then broken (other workers' answers to the same command are unread):
anything but ``close()`` raises, and ``close()`` ends the workers without waiting for answers
(each gets ``close``, a few seconds to finish, then ``terminate`` / ``kill``).

A sub-env's exception in ``env_method``, ``get_attr``, ``set_attr``, ``has_attr`` or
``env_is_wrapped`` (or a value of theirs that cannot be sent, or loaded here, or arguments
that do not load in the worker) breaks nothing (nor do arguments that do not pickle here: a
:class:`~gymcurric.errors.ConfigError` naming them and their type, nothing sent):
the worker goes on, its env as the call left it. It is raised as a
:class:`~gymcurric.errors.SubEnvCallError` naming the sub-env and the method (a
:class:`~gymcurric.errors.GymcurricError` as itself, with a note) once the other sub-envs'
answers to the call are read, so the pipes stay in step and the vector env can be stepped
again. (SB3's worker exits on such an exception.) A worker that dies or hangs during a call
breaks the vector env as during a step.

A worker that hangs (a ``step`` that never returns, a deadlocked simulator) neither answers
nor dies: with ``timeout``, the wait for each answer ends after that many seconds (the same
``poll`` call, given a time limit: nothing more per step), raising a
:class:`~gymcurric.errors.SubEnvError` that says so; ``close()`` terminates the hung worker
at once. An env that hangs while it is built (in its factory) is such a worker too: with
``build_timeout``, the constructor waits that long for each sub-env to be built, then raises
(naming the sub-env, "building the env") once every worker it started is ended.

A Ctrl-C (``KeyboardInterrupt``) while the main process waits for an answer leaves that answer
to come later, unread: the vector env is broken (the next command raises a
:class:`~gymcurric.errors.WorkerError` saying so, instead of reading that answer as its own);
``close()`` ends the workers without waiting for it. So is a command sent to a worker whose
last answer is unread, however that happened. A ``close()`` interrupted so, while it waits
for the workers to end, leaves them running: the next ``close()`` terminates them at once.
A Ctrl-C (or any exception) in the constructor, while it starts the workers (in a worker's
``process.start()`` too, once its process runs) or waits for them to be built, ends every
worker started so far before it is raised again.

:class:`CheckedDummyVecEnv` raises the same errors for an in-process sub-env's ``step`` or
``reset``, with the original exception as the ``__cause__``.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import time
import traceback
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
from numpy.typing import DTypeLike
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv
from stable_baselines3.common.vec_env.base_vec_env import (
    CloudpickleWrapper,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from gymcurric._checks import check_timeout
from gymcurric.errors import ConfigError, WorkerError
from gymcurric.integrations.sb3._subproc_remote import Remote, sub_env_error
from gymcurric.integrations.sb3._subproc_worker import worker
from gymcurric.wrappers._sub_envs import error_text

__all__ = ["CheckedDummyVecEnv", "CheckedSubprocVecEnv"]

#: Seconds the workers of a broken vector env get to close before they are terminated.
CLOSE_GRACE_S = 5.0


def _unsendable(cmd: str, data: Any, exc: Exception, owner: str) -> ConfigError:
    """The error for a call whose arguments do not pickle (nothing was sent: the env goes on)."""
    if cmd == "set_attr":
        key, value, call = "value", data[1], f"set_attr({data[0]!r})"
    elif cmd == "env_method":
        key, value, call = "method_args", (data[1], data[2]), f"env_method({data[0]!r})"
    elif cmd == "is_wrapped":  # env_is_wrapped's, e.g. a class defined in a function
        key, value, call = "wrapper_class", data, "env_is_wrapped"
    else:  # a name (get_attr, has_attr)
        key, value, call = "attr_name", data, cmd
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    what, it = f"a {'class' if isinstance(value, type) else kind} that does", "it"
    if cmd == "env_method":  # (args, kwargs): its type says nothing
        what, it = "arguments that do", "they"
    reason = f"{what} not pickle ({type(exc).__name__}: {error_text(exc)}), so {it} cannot be "
    reason += "sent to the sub-envs' worker processes; nothing was sent, the vector env goes on"
    return ConfigError(key, value, reason, source=f"{owner}.{call}")


def _reward_dtype(value: Any, source: str) -> np.dtype[Any] | None:
    """``reward_dtype`` as a floating numpy dtype, or None."""
    if value is None:
        return None
    try:
        dtype = np.dtype(value)
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind != "f":
        reason = "expected a floating numpy dtype (e.g. numpy.float32) or None"
        raise ConfigError("reward_dtype", value, reason, source=source)
    return dtype


class CheckedSubprocVecEnv(SubprocVecEnv):
    """SB3's ``SubprocVecEnv``, where a sub-env that raises or dies is an error, not a hang.

    A drop-in (it is one): the same arguments, methods and pipe protocol. A sub-env's exception
    (in ``step``, ``reset``, ``env_method``, ... or while it is built) comes back from its
    worker and is raised here as a :class:`~gymcurric.errors.SubEnvError` naming the sub-env's
    index and the exception's type, message and traceback (a
    :class:`~gymcurric.errors.GymcurricError` as itself, with a note naming the sub-env); a
    worker that dies (a signal, the OOM killer) is one too, naming how it ended, under every
    start method. With ``timeout``, so is a worker that does not answer in time (a hung
    sub-env). Afterwards only :meth:`close` works; it does not wait for the workers' answers,
    terminates a hung worker at once and ends any other that does not close within
    :data:`CLOSE_GRACE_S`.

    Args:
        env_fns: the sub-envs' factories.
        start_method: ``fork``, ``forkserver`` or ``spawn`` (default: forkserver where
            available, else spawn, as SB3).
        timeout: seconds to wait for each answer of a worker (a ``step``, ``reset``,
            ``env_method``, ...), measured from the moment the main process waits for it;
            None (the default) waits for ever, as SB3. A worker's first answer, which waits
            for it to start and build its env, is limited by ``build_timeout`` instead (building
            often takes far longer than a step). Every worker gives it in the constructor (to
            ``get_spaces`` or ``VecEnv.__init__``'s ``get_attr('render_mode')``), so every
            command after it is limited by ``timeout``, the first ``reset`` included (an env
            that sets itself up there, lazily, needs a timeout that allows for it, with or
            without ``build_timeout``). An answer that does not come in
            time is a :class:`~gymcurric.errors.SubEnvError` (``sub-env 1: step(): no reply
            within 0.5 s (the worker is alive: hung?); ...``) and the vector env is broken.
            With a timeout, :meth:`close` of a healthy env also ends a worker that takes
            longer than ``max(timeout, CLOSE_GRACE_S)`` to close.
        build_timeout: seconds each worker may take to start and build its env (its
            factory's call, imports included: allow for ``spawn`` and a loaded machine),
            measured from the moment the main process waits for it. The constructor waits
            for every sub-env to be built (they build in parallel); with a build_timeout,
            one that does not answer in time is a
            :class:`~gymcurric.errors.SubEnvError` (``sub-env 1: building the env: no reply
            within 60 s (the worker is alive: hung while building its env?); ...``), raised
            once every worker is ended (a worker still building is terminated at once). None
            (the default) waits for ever, as SB3.
        reward_dtype: a floating dtype for the rewards ``step_wait`` returns, e.g.
            ``np.float32``, what SB3's ``DummyVecEnv`` gives (its reward buffer's dtype), so
            that both vectorizations give the same run (``gymcurric train`` sets it). None (the
            default) answers as SB3's ``SubprocVecEnv``: ``np.stack`` of the sub-envs' rewards,
            float64 for Python floats.

    Raises:
        ConfigError: ``timeout`` or ``build_timeout`` is not a positive, finite number of
            seconds (at most 1e6) or None; ``reward_dtype`` is not a floating dtype or None;
            ``env_fns`` is empty.
    """

    def __init__(
        self,
        env_fns: list[Callable[[], gym.Env[Any, Any]]],
        start_method: str | None = None,
        *,
        timeout: float | None = None,
        build_timeout: float | None = None,
        reward_dtype: DTypeLike | None = None,
    ) -> None:
        self.waiting = False
        self.closed = False
        self.ended = False  # every worker joined and its pipes closed (closed: close() began)
        self.close_interrupted = False  # a close() raised part way: the next one finishes it
        self.failure: Exception | None = None
        self.timeout = check_timeout(timeout, source=type(self).__name__)
        self.reward_dtype = _reward_dtype(reward_dtype, type(self).__name__)
        self.wait_ms = None if self.timeout is None else math.ceil(self.timeout * 1000)
        self.build_timeout = check_timeout(
            build_timeout, "build_timeout", source=type(self).__name__
        )
        self.build_wait_ms = None
        if self.build_timeout is not None:
            self.build_wait_ms = math.ceil(self.build_timeout * 1000)
        if len(env_fns) == 0:  # SB3's: an IndexError reading sub-env 0's spaces
            reason = "expected at least one env factory"
            raise ConfigError("env_fns", env_fns, reason, source=type(self).__name__)
        if start_method is None:
            forkserver = "forkserver" in mp.get_all_start_methods()
            start_method = "forkserver" if forkserver else "spawn"
        ctx = mp.get_context(start_method)
        self.processes: list[Any] = []
        self.remotes: list[Remote] = []
        try:
            for index, env_fn in enumerate(env_fns):
                # one pipe at a time: a forked worker inherits no later worker's end
                remote, work_remote = ctx.Pipe()
                process = None
                try:
                    args = (work_remote, remote, CloudpickleWrapper(env_fn))
                    process = ctx.Process(target=worker, args=args, daemon=True)  # type: ignore[attr-defined]
                    process.start()
                finally:  # also where start() raised once its worker ran (a Ctrl-C in it)
                    work_remote.close()
                    self._keep(index, process, remote)
            # with a build_timeout, every worker's first answer (its build) is waited for that
            # long here; else, as SB3's, sub-env 0's here and the others' for ever in
            # VecEnv.__init__ (its get_attr('render_mode') asks every sub-env)
            first = self.remotes if self.build_timeout is not None else self.remotes[:1]
            for asked in first:
                asked.send(("get_spaces", None))
            spaces = [asked.recv() for asked in first]
            observation_space, action_space = spaces[0]
            # in the try: a sub-env that fails (or a Ctrl-C) there ends every worker too
            VecEnv.__init__(self, len(env_fns), observation_space, action_space)
        except BaseException:
            self.failure = self.failure or WorkerError("the vector env could not be started")
            for started in self.remotes:  # still building (no env to close yet; it may hang)
                with contextlib.suppress(OSError):
                    started.hung |= started.pending and not started.conn.poll(0)
            try:
                self.close()
            finally:  # a second Ctrl-C during it: no one else can close this env
                self.close()
            raise

    def _keep(self, index: int, process: Any, remote: Connection) -> None:
        """Keep a worker whose ``start()`` ran, raised part way or not, for ``close()`` to end.

        A worker that never ran (``ctx.Process`` or ``start()`` raised before its process was
        made) is not kept, and its pipe end is closed. (A Ctrl-C inside multiprocessing's
        ``Popen``, between the fork and its return, leaves a process no one knows of, not even
        multiprocessing: it ends once built, on its pipe's end, and, as no one waits for it,
        stays a zombie (an entry in the process table) until this process exits.)
        """
        if process is None or process.pid is None:
            remote.close()
            return
        self.processes.append(process)  # joined, ended if need be, by close()
        try:
            self.remotes.append(Remote(self, index, remote, process))
        except ValueError:  # start() raised before it kept the sentinel: no pipe to ask on
            remote.close()

    def step_wait(self) -> VecEnvStepReturn:
        """SB3's ``step_wait``; with ``reward_dtype``, the rewards in that dtype."""
        observations, rewards, dones, infos = super().step_wait()
        if self.reward_dtype is not None:
            rewards = rewards.astype(self.reward_dtype)
        return observations, rewards, dones, infos

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """SB3's ``env_method``; one that raises in a sub-env ends no worker (``_ask``)."""
        return self._ask("env_method", (method_name, method_args, method_kwargs), indices)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """SB3's ``get_attr``; one that raises in a sub-env ends no worker (``_ask``)."""
        return self._ask("get_attr", attr_name, indices)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """SB3's ``set_attr``; one that raises in a sub-env ends no worker (``_ask``).

        Raises:
            ConfigError: ``value`` does not pickle (it is sent to each worker process), naming
                the attribute and the value's type; nothing was set, the vector env goes on.
        """
        self._ask("set_attr", (attr_name, value), indices)

    def has_attr(self, attr_name: str) -> bool:
        """SB3's ``has_attr``; one that raises in a sub-env ends no worker (``_ask``)."""
        return all(self._ask("has_attr", attr_name, None))

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]], indices: VecEnvIndices = None
    ) -> list[bool]:
        """SB3's ``env_is_wrapped``; one that raises in a sub-env ends no worker (``_ask``)."""
        return self._ask("is_wrapped", wrapper_class, indices)

    def _ask(self, cmd: str, data: Any, indices: VecEnvIndices) -> list[Any]:
        """Send ``(cmd, data)`` (one of SB3's calls) to the sub-envs of ``indices``: their answers.

        Every answer is read before an error is raised, so the pipes stay in step: a sub-env
        whose call raised (its worker goes on) is raised as a
        :class:`~gymcurric.errors.SubEnvCallError` (a
        :class:`~gymcurric.errors.GymcurricError` as itself, with a note; the first such, a
        note names the others) and the vector env stays usable (``failure`` stays None). A
        worker that died or hung breaks it, raised at once. Arguments that do not pickle
        (nothing is sent) are a :class:`~gymcurric.errors.ConfigError` naming them.
        """
        remotes: list[Remote] = self._get_target_remotes(indices)
        sent = 0
        try:
            for remote in remotes:
                remote.send((cmd, data))
                sent += 1
        except Exception as exc:
            if self.failure is not None or self.closed:  # broken (a dead worker, ...)
                raise
            for remote in remotes[:sent]:  # their answers unwanted, read: the pipes in step
                with contextlib.suppress(Exception):
                    remote.recv()
            raise _unsendable(cmd, data, exc, type(self).__name__) from exc
        answers: list[Any] = []
        failed: list[tuple[int, Exception]] = []
        for remote in remotes:
            try:
                answers.append(remote.recv())
            except Exception as exc:
                if self.failure is not None:  # broken (a death, a hang): close() drains
                    raise
                failed.append((remote.index, exc))
                answers.append(None)
        if failed:
            error = failed[0][1]
            if len(failed) > 1:
                error.add_note(f"Sub-envs {[i for i, _ in failed[1:]]} raised too")
            raise error
        return answers

    def check_usable(self) -> None:
        """Raise where a sub-env failed before (it can only be closed), or it is closed."""
        if self.closed:
            raise WorkerError("the vector env is closed")
        if self.failure is not None:
            raise WorkerError(
                f"the vector env cannot be used after this error (close it): {self.failure}"
            )

    def broken(self, error: Exception) -> Exception:
        """Record the first failure (the vector env is broken from now on); returns ``error``."""
        if self.failure is None:
            self.failure = error
        return error

    def close(self) -> None:
        """Close the workers: with a failure, without waiting for answers (a hang otherwise).

        A hung worker (no answer within ``timeout``) is terminated at once. Every worker is
        joined, and the pipes to it closed (its ``exitcode`` stays readable). A ``close()``
        interrupted part way (a Ctrl-C while it waits for the workers) leaves them running: call
        it again, and the workers still running are terminated at once. A ``close()`` while
        another is still under way (in another thread) returns at once, ending nothing early.
        A ``close()`` run by a finalizer (a user's ``__del__``) while the garbage collector
        collects a reference cycle that holds this env may find pipe fds that the collector
        closed already (``Connection.__del__``): it does not use or close their numbers again
        (another file may have one by now); their workers read their pipe's end and exit.
        """
        if self.closed:
            if self.close_interrupted and not self.ended:  # what it waited for is not waited for
                # again; one still under way elsewhere is left to give its grace period
                self._end_workers(0.0)
            return
        for remote in self.remotes:  # the answers not read yet (after step_async: all, as SB3)
            # a close() run by the garbage collector (a finalizer's, this env in a reference
            # cycle) finds the remotes' proxies of it dead, as every weak reference to an
            # object it collects is cleared before finalizers run: recv() raised ReferenceError
            # and the answer was left unread, its worker blocked sending it (a large one) until
            # ended. The proxy that is alive, else a new one.
            remote.venv = weakref.proxy(self)
            if not remote.owns_fd:  # closed by the collector (Connection.__del__): its worker
                # reads its pipe's end; the fd's number, maybe another file's now, is not used
                remote.in_sync = False
            elif self.failure is None and remote.pending:
                # a call's error (read: the worker goes on), or broken now (self.failure:
                # closed below without waiting); with a timeout, a hung worker ends the wait
                with contextlib.suppress(Exception):
                    remote.recv()
        self.waiting = False
        healthy = self.failure is None
        self.closed = True
        try:
            self._send_close(healthy)
            grace: float | None = CLOSE_GRACE_S
            if healthy:  # waited for, as SB3's; with a timeout, not for ever
                grace = None if self.timeout is None else max(self.timeout, CLOSE_GRACE_S)
            self._end_workers(grace)
        except BaseException:  # a Ctrl-C while it waits, say: the next close() finishes it
            self.close_interrupted = True
            raise

    def _send_close(self, healthy: bool) -> None:
        """Send each worker ``close`` (a hung one is terminated, a pipe out of step closed)."""
        for remote in self.remotes:
            if remote.hung:  # it would not read a close command: it is ended now
                remote.process.terminate()
                continue
            if not remote.in_sync:  # its worker sees the pipe's end (or is terminated)
                remote.close()
                continue
            try:
                while not healthy and remote.conn.poll(0):  # a worker blocked sending its answer
                    remote.conn.recv_bytes()  # (not loaded: it may not unpickle)
                remote.conn.send(("close", None))
            except (OSError, EOFError):
                pass  # gone already

    def _end_workers(self, grace: float | None) -> None:
        """Join the workers, ``grace`` s at most (None: for ever), then end the others."""
        deadline = time.monotonic() + (grace or 0.0)
        for process in self.processes:
            process.join(None if grace is None else max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join(1.0)
            if process.is_alive():
                process.kill()
                process.join()
            # its two pipe fds (the sentinel), open otherwise for as long as the Process lives
            # (self.processes keeps it, its exitcode readable). Process.close() would close
            # them too, and make exitcode unreadable.
            if process._popen is not None:
                process._popen.close()
        for remote in self.remotes:
            remote.close()
        self.ended = True


class _Guarded:
    """A sub-env during a :class:`CheckedDummyVecEnv` step or reset: its errors name it."""

    __slots__ = ("env", "in_step", "index")

    def __init__(self, env: gym.Env[Any, Any], index: int, in_step: bool) -> None:
        self.env, self.index, self.in_step = env, index, in_step

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, action: Any) -> Any:
        try:
            return self.env.step(action)
        except Exception as exc:
            self._raise("step()", exc)

    def reset(self, **kwargs: Any) -> Any:
        what = "reset() after an episode's end (in step())" if self.in_step else "reset()"
        try:
            return self.env.reset(**kwargs)
        except Exception as exc:
            self._raise(what, exc)

    def _raise(self, command: str, exc: Exception) -> NoReturn:
        kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        text = "".join(traceback.format_exception(exc))
        error = sub_env_error(self.index, command, kind, error_text(exc), text, exc, False)
        if error is exc:  # gymcurric's own, with a note
            raise exc
        raise error from exc


class CheckedDummyVecEnv(DummyVecEnv):
    """SB3's ``DummyVecEnv``, where an exception in a sub-env's ``step`` / ``reset`` names it.

    A :class:`~gymcurric.errors.SubEnvError` naming the sub-env's index, what it did and the
    exception (its ``__cause__``); a :class:`~gymcurric.errors.GymcurricError` is raised as
    itself, with a note naming the sub-env.
    """

    def step_wait(self) -> Any:
        """SB3's ``step_wait``; an exception of a sub-env (or its autoreset) names it."""
        return self._guarded(super().step_wait, True)

    def reset(self) -> VecEnvObs:
        """SB3's ``reset``; an exception of a sub-env names it."""
        return self._guarded(super().reset, False)

    def _guarded(self, call: Callable[[], Any], in_step: bool) -> Any:
        envs = self.envs
        self.envs = [_Guarded(env, i, in_step) for i, env in enumerate(envs)]  # type: ignore[misc]
        try:
            return call()
        finally:
            self.envs = envs
