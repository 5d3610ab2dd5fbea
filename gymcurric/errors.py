"""The exceptions and warnings gymcurric raises.

Every error message names what was wrong (the file, key or parameter) and the value received,
so a user can fix the input without reading our source.

Hierarchy::

    GymcurricError
    ├── ConfigError (ValueError)         invalid parameter / config value
    │   ├── TaskError                    a task dict an env refuses
    │   └── UnreadableModelError         a model folder that is missing or says not what it holds
    ├── DataError (ValueError)           malformed file contents (datapacks, checkpoints)
    ├── DependencyNotInstalled (ImportError)
    ├── EnvUnavailableError (RuntimeError)  an env id that exists but cannot run here
    ├── InfoKeyConflictError (KeyError)  a wrapper would overwrite an existing info key
    ├── NonFiniteValueError (ValueError) NaN/Inf reward or cost where raising was asked for
    └── WorkerError (RuntimeError)       a worker process died or failed
        ├── SubEnvCallError              a sub-env's method raised (its worker goes on)
        └── SubEnvError                  a sub-env's step/reset raised, its worker died or hung
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "DataError",
    "DependencyNotInstalled",
    "EnvUnavailableError",
    "GymcurricError",
    "GymcurricWarning",
    "InfoKeyConflictError",
    "NonFiniteValueError",
    "SubEnvCallError",
    "SubEnvError",
    "TaskError",
    "UnreadableModelError",
    "WorkerError",
]


_NO_VALUE: Any = object()


class GymcurricError(Exception):
    """Base class of every error gymcurric raises on purpose."""


class ConfigError(GymcurricError, ValueError):
    """A parameter or config value is invalid.

    Args:
        key: the parameter or config key, e.g. ``"hazard_radius"`` or ``"curriculum.pool_size"``.
        value: the value received.
        reason: what is wrong with it / what is expected.
        source: where it came from (a file path, ``"reset(options)"``, a class name), optional.

    ``ConfigError(other_error)`` or ``ConfigError("message")`` with a single argument also work:
    Gymnasium's ``AsyncVectorEnv`` re-raises a worker's error as ``type(error)(error)``, and the
    fields of the original survive that.
    """

    key: Any
    value: Any
    reason: str
    source: str | None

    def __init__(
        self, key: Any, value: Any = _NO_VALUE, reason: str = "", *, source: str | None = None
    ) -> None:
        if value is _NO_VALUE:
            original = key if isinstance(key, ConfigError) else None
            self.key = original.key if original else None
            self.value = original.value if original else None
            self.reason = original.reason if original else str(key)
            self.source = original.source if original else source
            super().__init__(str(key))
            return
        self.key = key
        self.value = value
        self.reason = reason
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}invalid value for {key!r}: {value!r} ({reason})")

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions cross process boundaries (AsyncVectorEnv, SubprocVecEnv): keep the fields,
        # and the state (__notes__ included: where in the worker it was raised)
        if self.key is None:
            return (type(self), (str(self),), self.__dict__)
        args = (type(self), self.key, self.value, self.reason, self.source)
        return (_rebuild_config_error, args, self.__dict__)


def _rebuild_config_error(
    cls: type[ConfigError], key: str, value: Any, reason: str, source: str | None
) -> ConfigError:
    return cls(key, value, reason, source=source)


class TaskError(ConfigError):
    """An env refused a task dict passed as ``reset(options={"task": ...})``."""


class UnreadableModelError(ConfigError):
    """A model folder that does not exist, or whose ``config.json`` says not what it holds.

    A name that is no existing path and that no hub id can be, a folder without a
    ``config.json``, or one whose ``config.json`` cannot be read or names no ``model_type``.
    Raised by :func:`~gymcurric.semantics.embedders.load_embedder` before torch is imported;
    :func:`~gymcurric.semantics.embedders.load_embedder_soft` returns a failed embedder instead.
    """


class DataError(GymcurricError, ValueError):
    """A file's contents are malformed; the message names file, line, field and value."""


class DependencyNotInstalled(GymcurricError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


class EnvUnavailableError(GymcurricError, RuntimeError):
    """An environment id is known but cannot be built on this installation."""


class InfoKeyConflictError(GymcurricError, KeyError):
    """A wrapper was about to overwrite an info key that something else already set."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain message
        return str(self.args[0]) if self.args else ""


class NonFiniteValueError(GymcurricError, ValueError):
    """A reward or cost was NaN or infinite and the wrapper was configured to raise."""


class WorkerError(GymcurricError, RuntimeError):
    """A worker process died or reported a failure."""


class SubEnvCallError(WorkerError):
    """A method called on a sub-env of a vector env raised there; the vector env goes on.

    Raised for the methods gymcurric calls on sub-envs, and by
    :class:`~gymcurric.integrations.sb3.CheckedSubprocVecEnv`'s ``env_method``, ``get_attr``,
    ``set_attr``, ``has_attr`` and ``env_is_wrapped``. Raised in the main process, with the
    sub-env's worker (if it has one) still running: the vector env can be stepped again or
    closed. The original exception is the ``__cause__`` where it could be sent from the
    worker; the fields keep what is known of it in any case.

    Attributes:
        index: the sub-env's index in the vector env.
        method: the method's name, e.g. ``"describe"``; or, for what is not a method call,
            what was asked, e.g. ``"get_attr('task_id')"``.
        error_type: the original exception's type, ``module.QualName``.
        error_message: its message (``str(error)``).
        worker_traceback: its traceback, formatted in the sub-env's process.
        in_worker: whether the sub-env runs in a worker process (``AsyncVectorEnv``,
            ``SubprocVecEnv``); False for ``SyncVectorEnv`` / ``DummyVecEnv``.
        stage: ``"call"``: the method raised; ``"send"``: its value cannot be pickled to be
            sent to the main process; ``"load"``: it was sent and does not load there;
            ``"args"``: its arguments (or the value to set) do not load in the sub-env's
            process (a class only the main process has), so it was not called.
    """

    def __init__(
        self,
        index: int,
        method: str,
        error_type: str,
        error_message: str,
        worker_traceback: str = "",
        in_worker: bool = True,
        stage: str = "call",
    ) -> None:
        self.index = index
        self.method = method
        self.error_type = error_type
        self.error_message = error_message
        self.worker_traceback = worker_traceback
        self.in_worker = in_worker
        self.stage = stage
        call = method if method.endswith(")") else f"{method}()"
        what = {
            "send": f"the value {call} returned cannot be sent to the main process:",
            "load": f"the value {call} returned does not load in the main process:",
            "args": f"the arguments of {call} do not load in the sub-env's process:",
        }.get(stage, f"{call} raised")
        goes_on = "the sub-env's worker goes on: " if in_worker else ""
        super().__init__(
            f"sub-env {index}: {what} {error_type}: {error_message} ({goes_on}the vector env "
            "can be stepped or closed)"
        )
        if worker_traceback:
            self.add_note(f"In the sub-env's process:\n{worker_traceback.rstrip()}")

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.index, self.method, self.error_type, self.error_message)
        more = (self.worker_traceback, self.in_worker, self.stage)
        # the state (notes included) replaces what __init__ sets: each note once
        return (type(self), (*args, *more), self.__dict__)


class SubEnvError(WorkerError):
    """A sub-env of a vector env failed: its ``step`` or ``reset`` raised, its worker died or hung.

    Raised in the main process by gymcurric's SB3 vector envs
    (:class:`~gymcurric.integrations.sb3.CheckedSubprocVecEnv`,
    :class:`~gymcurric.integrations.sb3.CheckedDummyVecEnv`). The vector env cannot be stepped
    again, only closed. The original exception is the ``__cause__`` where it could be sent from
    the worker (a :class:`GymcurricError` is raised as itself instead, with a note naming the
    sub-env).

    Attributes:
        index: the sub-env's index in the vector env.
        command: what the sub-env was doing, e.g. ``"step()"``, ``"reset()"``,
            ``"building the env"``.
        error_type: the exception's type, ``module.QualName``; None where the worker died
            without a word (a signal, ``os._exit``).
        error_message: its message, or how the worker ended (``"killed by signal SIGKILL"``),
            or ``"no reply within 0.5 s (the worker is alive: hung?)"`` (``timeout``).
        worker_traceback: the exception's traceback, formatted where it was raised ("" if none).
        in_worker: whether the sub-env runs in a worker process (False for ``DummyVecEnv``).
        timeout: the seconds waited for an answer that did not come while the worker lived
            (``CheckedSubprocVecEnv(timeout=...)``: a hung sub-env; ``build_timeout=...``: one
            hung while it was built, ``command`` ``"building the env"``); None otherwise.
    """

    def __init__(
        self,
        index: int,
        command: str,
        error_type: str | None,
        error_message: str,
        worker_traceback: str = "",
        in_worker: bool = True,
        timeout: float | None = None,
    ) -> None:
        self.index = index
        self.command = command
        self.error_type = error_type
        self.error_message = error_message
        self.worker_traceback = worker_traceback
        self.in_worker = in_worker
        self.timeout = timeout
        if timeout is not None:  # the message ends in a parenthesis already
            what = f"{command}: {error_message}; the vector env cannot go on"
        elif error_type is None:
            what = f"its worker process died during {command}: {error_message}"
        else:
            what = f"{command} raised {error_type}: {error_message}"
        if timeout is None:
            what += " (the vector env cannot go on)"
        super().__init__(f"sub-env {index}: {what}")
        if worker_traceback:
            where = "the sub-env's process" if in_worker else "the sub-env"
            self.add_note(f"In {where}:\n{worker_traceback.rstrip()}")

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.index, self.command, self.error_type, self.error_message)
        more = (self.worker_traceback, self.in_worker, self.timeout)
        return (type(self), (*args, *more), self.__dict__)


class GymcurricWarning(UserWarning):
    """Warnings gymcurric emits (e.g. non-finite costs replaced by 0)."""
