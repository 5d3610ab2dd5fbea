"""The worker process of :class:`~gymcurric.integrations.sb3.CheckedSubprocVecEnv`.

SB3's ``SubprocVecEnv`` worker loop and pipe protocol, except that an exception raised by the
sub-env (while it is built, in ``step``, ``reset``, ``env_method``, ...) or a value that does
not pickle is sent back as a :class:`Failure` instead of ending the worker. The main process's
side, which raises it as an error naming the sub-env, is in ``checked_vec_env``.
"""

from __future__ import annotations

import pickle
import traceback
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

import gymnasium as gym
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.vec_env.base_vec_env import CloudpickleWrapper
from stable_baselines3.common.vec_env.patch_gym import _patch_env

from gymcurric.wrappers._sub_envs import error_text

__all__ = ["CALLS", "Failure", "Served", "failure", "worker"]


#: The commands that ask a sub-env something (SB3's ``env_method``, ``get_attr``, ...): an
#: exception in one leaves its worker serving, and the vector env usable.
CALLS = frozenset(("env_method", "get_attr", "has_attr", "set_attr", "is_wrapped"))


class Failure(NamedTuple):
    """What a worker sends back in place of an answer: its env raised.

    ``goes_on``: the worker goes on serving (a call's failure: :data:`CALLS`, or a command
    that did not load); ``stage``: ``"call"`` (it raised), ``"send"`` (its value does not
    pickle) or ``"args"`` (the command, its arguments, did not load in the worker), as
    :class:`~gymcurric.errors.SubEnvCallError` names them.
    """

    command: str
    error_type: str
    message: str
    traceback: str
    blob: bytes | None  # the exception, pickled (None where it does not pickle)
    goes_on: bool = False
    stage: str = "call"


def failure(
    command: str, exc: BaseException, goes_on: bool = False, stage: str = "call"
) -> Failure:
    """The :class:`Failure` to send for ``exc``, raised while the worker was at ``command``."""
    try:
        blob: bytes | None = pickle.dumps(exc)
    except Exception:
        blob = None
    kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
    text = traceback.format_exc()
    return Failure(command, kind, error_text(exc), text, blob, goes_on, stage)


class Served:
    """A worker's env and the commands of SB3's ``SubprocVecEnv`` protocol on it."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        self.env = env
        self.reset_info: dict[str, Any] | None = {}
        self.doing = ""

    def run(self, cmd: str, data: Any) -> Any:
        env = self.env
        self.doing = f"{cmd}()"
        if cmd == "step":
            observation, reward, terminated, truncated, info = env.step(data)
            done = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            if done:  # save the final observation where the user can get it, then reset
                info["terminal_observation"] = observation
                self.doing = "reset() after an episode's end (in step())"
                observation, self.reset_info = env.reset()
            return (observation, reward, done, info, self.reset_info)
        if cmd == "reset":
            maybe_options = {"options": data[1]} if data[1] else {}
            observation, self.reset_info = env.reset(seed=data[0], **maybe_options)
            return (observation, self.reset_info)
        if cmd == "render":
            return env.render()
        if cmd == "get_spaces":
            return (env.observation_space, env.action_space)
        if cmd in ("env_method", "get_attr", "has_attr", "set_attr"):
            name = data[0] if cmd in ("env_method", "set_attr") else data
            self.doing = f"{cmd}({name!r})"
        if cmd == "env_method":
            return env.get_wrapper_attr(data[0])(*data[1], **data[2])
        if cmd == "get_attr":
            return env.get_wrapper_attr(data)
        if cmd == "has_attr":
            try:
                env.get_wrapper_attr(data)
            except AttributeError:
                return False
            return True
        if cmd == "set_attr":
            return setattr(env, data[0], data[1])
        if cmd == "is_wrapped":
            return is_wrapped(env, data)
        raise NotImplementedError(f"`{cmd}` is not implemented in the worker")


def worker(remote: Connection, parent_remote: Connection, env_fn: CloudpickleWrapper) -> None:
    """A sub-env's process: SB3's worker loop, answering a failure instead of dying of it."""
    parent_remote.close()
    served: Served | None = None
    failed: Failure | None = None
    try:
        served = Served(_patch_env(env_fn.var()))
    except KeyboardInterrupt:
        return
    except Exception as exc:  # the answer to every command but close
        failed = failure("building the env", exc)
    while True:
        try:
            cmd, data = remote.recv()
        except (EOFError, OSError, KeyboardInterrupt):  # the main process is gone
            break
        except Exception as exc:  # read whole, does not load here (a class only the main
            # process has): nothing was done, the pipe is in step; the main process knows
            # which command it sent, and whether it goes on (CALLS)
            remote.send(failure("loading the command in the worker", exc, True, "args"))
            continue
        if cmd == "close":
            if served is not None:
                served.env.close()  # an error here ends the worker with its traceback, as SB3's
            remote.close()
            break
        try:
            reply = failed if served is None else served.run(cmd, data)
        except KeyboardInterrupt:
            break
        except Exception as exc:  # a call's (CALLS) leaves the env as it was: it goes on
            reply = failure(served.doing if served else cmd, exc, cmd in CALLS)
        try:
            remote.send(reply)
        except (BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
            break
        except Exception as exc:  # the answer does not pickle (nothing of it was sent)
            goes_on = served is not None and cmd in CALLS
            remote.send(failure(f"sending the answer of {cmd}()", exc, goes_on, "send"))
