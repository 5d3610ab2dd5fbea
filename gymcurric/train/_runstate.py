"""A run's state as JSON plus ``.npz`` arrays: no pickle, so a checkpoint is safe to load.

:func:`encode` turns the plain state of Python objects (numbers, strings, numpy and torch
arrays, numpy / torch generators, containers of these, objects with a
``state_dict``/``load_state_dict`` pair, and gymcurric's or SB3's own small state objects) into
a JSON tree whose arrays are kept apart, to be written to one ``.npz`` file. :func:`decode_into`
restores such a tree onto the freshly built object of the same run. Decoding creates only
these plain types: no class is looked up by name except gymcurric's and SB3's running
statistics, and none of their code runs but ``load_state_dict``.

The per-env part of an exact resume is :class:`EpisodeLog`: a wrapper directly around the
env that ``gym.make`` returns. It gives every reset a seed (drawn from its own generator when
the caller passes none) and records the current episode's seed, options and actions, so that
a fresh env reaches the same state by replaying them. The wrappers above it are restored from
their attributes.
"""

from __future__ import annotations

import collections
import importlib
import math
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from gymcurric._deprecated import current_name
from gymcurric.errors import DataError

__all__ = [
    "EpisodeLog",
    "Unencodable",
    "capture_venv",
    "decode",
    "decode_into",
    "encode",
    "encode_items",
    "encode_vars",
    "restore_venv",
    "vec_layers",
]

#: classes outside gymcurric whose plain attributes are state (restored by attribute)
_FOREIGN_STATE = frozenset({"stable_baselines3.common.running_mean_std.RunningMeanStd"})
#: attributes that are never state: the env below, shared objects saved on their own, models
SKIP_NAMES = frozenset(
    {
        "env",
        "envs",
        "venv",
        "curriculum",
        "sampler",
        "embedder",
        "_embedder",
        "results_writer",
        "class_attributes",
        "_channel",
        "_direct",
        "_transport",
        "_cache",
        "_template",
        "spec",
        "metadata",
        "render_mode",
        "observation_space",
        "action_space",
        "single_observation_space",
        "single_action_space",
        "_observation_space",
        "_action_space",
        "_metadata",
        "_cached_spec",
        "_saved_kwargs",
        "_ezpickle_args",
        "_ezpickle_kwargs",
    }
)


class Unencodable(TypeError):
    """A value that is not plain state (an env, a model, a callable)."""


def _array_key(arrays: dict[str, np.ndarray]) -> str:
    return f"a{len(arrays)}"


def _class_path(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_state_object(obj: Any) -> bool:
    path = _class_path(obj)
    return (
        (path.startswith("gymcurric.") or path in _FOREIGN_STATE)
        and hasattr(obj, "__dict__")
        and not isinstance(obj, gym.Env | gym.vector.VectorEnv)
    )


def encode(
    value: Any, arrays: dict[str, np.ndarray], skip_ids: frozenset[int] = frozenset()
) -> Any:
    """``value`` as a JSON tree; its arrays are added to ``arrays``.

    Raises:
        Unencodable: ``value`` holds something that is not plain state.
    """
    if value is None or isinstance(value, bool | str):
        return value
    if id(value) in skip_ids:
        raise Unencodable("a shared object saved on its own")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$f": repr(value)}
    if isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value)
        if arr.dtype.hasobject:
            raise Unencodable("an object array")
        key = _array_key(arrays)
        arrays[key] = arr
        return {"$a": key, "scalar": isinstance(value, np.generic)}
    if isinstance(value, np.random.Generator):
        return {"$gen": encode(value.bit_generator.state, arrays)}
    if isinstance(value, np.random.RandomState):
        return {"$rs": encode(value.get_state(legacy=False), arrays)}
    if isinstance(value, list):
        packed = _pack_numbers(value, arrays)  # e.g. SB3 Monitor's per-episode lists
        return packed if packed is not None else [encode(v, arrays, skip_ids) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {"$tuple": [encode(v, arrays, skip_ids) for v in value]}
    if isinstance(value, collections.deque):
        return {"$deque": [encode(v, arrays, skip_ids) for v in value], "maxlen": value.maxlen}
    if isinstance(value, dict) and type(value) in (dict, collections.OrderedDict):
        items = [[encode(k, arrays), encode(v, arrays, skip_ids)] for k, v in value.items()]
        return {"$dict": items}
    torch_value = _encode_torch(value, arrays)
    if torch_value is not None:
        return torch_value
    if callable(getattr(value, "state_dict", None)) and callable(
        getattr(value, "load_state_dict", None)
    ):
        if isinstance(value, gym.Env | gym.vector.VectorEnv):
            raise Unencodable("an env")
        out = {"$state": encode(value.state_dict(), arrays, skip_ids)}
        if _is_state_object(value):  # and the exact attributes (a state_dict may round)
            out["vars"] = encode_vars(value, arrays, skip_ids)
        return out
    if _class_path(value).startswith("gymcurric.") and _has_dict_form(value):
        return {"$data": _class_path(value), "dict": encode(value.to_dict(), arrays)}
    if _is_state_object(value):
        return {"$obj": _class_path(value), "vars": encode_vars(value, arrays, skip_ids)}
    raise Unencodable(f"a {type(value).__name__}")


def _pack_numbers(value: list[Any], arrays: dict[str, np.ndarray]) -> Any:
    """A long list of plain floats (or ints) as one array; ``None`` for any other list."""
    if len(value) < 16:
        return None
    kinds = {type(v) for v in value}
    if kinds == {float}:
        dtype: Any = np.float64
    elif kinds == {int} and all(-(2**63) <= v < 2**63 for v in value):
        dtype = np.int64
    else:
        return None
    key = _array_key(arrays)
    arrays[key] = np.array(value, dtype=dtype)
    return {"$list": key}


def _has_dict_form(value: Any) -> bool:
    return callable(getattr(value, "to_dict", None)) and callable(
        getattr(type(value), "from_dict", None)
    )


def _encode_torch(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    torch = _torch()
    if torch is None:
        return None
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        dtype = str(t.dtype).removeprefix("torch.")
        if t.dtype == torch.bfloat16:
            t = t.float()
        key = _array_key(arrays)
        arrays[key] = t.numpy().copy()
        return {"$tensor": key, "dtype": dtype, "device": str(value.device)}
    if isinstance(value, torch.Generator):
        return {"$tgen": encode(value.get_state(), arrays), "device": str(value.device)}
    return None


def _torch() -> Any:
    import sys

    return sys.modules.get("torch")  # a tensor can exist only once torch is imported


def encode_vars(
    obj: Any, arrays: dict[str, np.ndarray], skip_ids: frozenset[int] = frozenset()
) -> dict[str, Any]:
    """The encodable attributes of ``obj`` (the others are left out: see :data:`SKIP_NAMES`)."""
    return encode_items(vars(obj), arrays, skip_ids, SKIP_NAMES)


def encode_items(
    mapping: Any,
    arrays: dict[str, np.ndarray],
    skip_ids: frozenset[int] = frozenset(),
    skip_names: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """``{key: encode(value)}`` for the entries of a str-keyed mapping that are plain state."""
    out: dict[str, Any] = {}
    for name, value in mapping.items():
        if name in skip_names:
            continue
        try:
            out[name] = encode(value, arrays, skip_ids)
        except Unencodable:
            continue
    return out


def decode(tree: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The value :func:`encode` wrote (objects of gymcurric's classes are rebuilt bare)."""
    if isinstance(tree, list):
        return [decode(v, arrays) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "$f" in tree:
        return float(tree["$f"])
    if "$a" in tree:
        arr = _array(arrays, tree["$a"])
        # a fresh copy: arrays read from an .npz may sit at any alignment, and numpy's SIMD
        # reductions round differently on differently aligned data
        return arr[()] if tree.get("scalar") else np.array(arr, copy=True)
    if "$gen" in tree:
        state = decode(tree["$gen"], arrays)
        bitgen = getattr(np.random, str(state.get("bit_generator", "")), None)
        if bitgen is None or not isinstance(bitgen, type):
            raise DataError(f"unknown numpy bit generator {state.get('bit_generator')!r}")
        gen = np.random.Generator(bitgen())
        gen.bit_generator.state = state
        return gen
    if "$rs" in tree:
        rs = np.random.RandomState()
        rs.set_state(decode(tree["$rs"], arrays))
        return rs
    if "$list" in tree:
        arr = _array(arrays, tree["$list"])
        if arr.ndim != 1 or arr.dtype not in (np.float64, np.int64):
            raise DataError(f"array {tree['$list']!r} is not a list of numbers")
        return arr.tolist()
    if "$tuple" in tree:
        return tuple(decode(v, arrays) for v in tree["$tuple"])
    if "$deque" in tree:
        return collections.deque((decode(v, arrays) for v in tree["$deque"]), tree["maxlen"])
    if "$dict" in tree:
        return {_hashable(decode(k, arrays)): decode(v, arrays) for k, v in tree["$dict"]}
    if "$tensor" in tree:
        import torch

        dtype = getattr(torch, str(tree["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise DataError(f"a saved tensor names dtype {tree['dtype']!r}, which is not one")
        t = torch.from_numpy(_array(arrays, tree["$tensor"]).copy())
        return t.to(dtype=dtype, device=str(tree["device"]))
    if "$tgen" in tree:
        import torch

        tgen = torch.Generator(device=str(tree["device"]))
        tgen.set_state(decode(tree["$tgen"], arrays))
        return tgen
    if "$state" in tree:
        raise DataError("a saved state_dict can only be restored onto an existing object")
    if "$obj" in tree:
        return _rebuild(tree, arrays)
    if "$data" in tree:
        data_cls: Any = _state_class(str(tree["$data"]))
        if not _has_dict_form_class(data_cls):
            raise DataError(f"a saved run state names {tree['$data']!r}, which is not run state")
        return data_cls.from_dict(decode(tree["dict"], arrays))
    raise DataError(f"unknown entry in a saved run state: {sorted(tree)[:3]}")


def _hashable(key: Any) -> Any:
    if isinstance(key, np.ndarray):
        return key.item()
    return key


def _array(arrays: dict[str, np.ndarray], key: Any) -> np.ndarray:
    try:
        return arrays[str(key)]
    except KeyError:
        raise DataError(f"array {key!r} is missing from the saved arrays") from None


def _has_dict_form_class(cls: type) -> bool:
    return callable(getattr(cls, "to_dict", None)) and callable(getattr(cls, "from_dict", None))


def _state_class(path: str) -> type:
    """The class a saved state names: gymcurric's own (or a listed SB3 one), nothing else."""
    module_name, _, qualname = path.rpartition(".")
    if not (path.startswith("gymcurric.") or path in _FOREIGN_STATE) or "." in qualname:
        raise DataError(f"a saved run state names class {path!r}, which is not run state")
    try:
        cls = getattr(importlib.import_module(module_name), qualname)
    except (ImportError, AttributeError) as exc:
        raise DataError(f"a saved run state names class {path!r}, which is unknown") from exc
    if not isinstance(cls, type) or f"{cls.__module__}.{cls.__qualname__}" != path:
        raise DataError(f"a saved run state names {path!r}, which is not run state")
    return cls


def _rebuild(tree: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    cls = _state_class(str(tree["$obj"]))
    obj: Any = object.__new__(cls)
    for name, value in tree["vars"].items():
        object.__setattr__(obj, name, decode(value, arrays))
    return obj


def decode_into(current: Any, tree: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Restore ``tree`` onto ``current`` where it is an object; returns the value to keep."""
    if isinstance(tree, dict) and "$state" in tree:
        if current is None or not callable(getattr(current, "load_state_dict", None)):
            raise DataError(
                f"the saved state of a {type(current).__name__} has no object to restore onto"
            )
        current.load_state_dict(decode(tree["$state"], arrays))
        if "vars" in tree:
            restore_vars(current, tree["vars"], arrays)
        return current
    if isinstance(tree, dict) and "$a" in tree and not tree.get("scalar"):
        saved = _array(arrays, tree["$a"])
        if (
            isinstance(current, np.ndarray)
            and current.shape == saved.shape
            and current.dtype == saved.dtype
            and current.flags.writeable
        ):
            current[...] = saved  # in place: other holders of the array see it too
            return current
        return np.array(saved, copy=True)
    if isinstance(tree, dict) and "$obj" in tree and current is not None:
        if _class_path(current) != tree["$obj"]:
            return decode(tree, arrays)
        restore_vars(current, tree["vars"], arrays)
        return current
    return decode(tree, arrays)


def restore_vars(obj: Any, saved: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Set the attributes of ``obj`` that :func:`encode_vars` saved."""
    for name, tree in saved.items():
        value = decode_into(vars(obj).get(name), tree, arrays)
        object.__setattr__(obj, name, value)


class EpisodeLog(gym.Wrapper[Any, Any, Any, Any]):
    """Seeds every reset and records the current episode, so that a fresh env can replay it.

    A reset without a seed gets one drawn from this wrapper's generator (itself seeded by the
    last explicit seed), so each episode is a function of its seed, its options and its
    actions, whatever generators the env keeps inside. Observations, rewards and infos pass
    through unchanged.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self._seeder = np.random.default_rng(0)
        self._episode_seed: int | None = None
        self._options: Any = None
        self._actions: list[Any] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset with ``seed`` (or one drawn here) and start recording."""
        if seed is not None:
            self._seeder = np.random.default_rng(seed)
        else:
            seed = int(self._seeder.integers(2**31 - 1))
        self._episode_seed, self._options, self._actions = seed, options, []
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step, recording the action."""
        self._actions.append(np.array(action, copy=True))
        return self.env.step(action)

    def episode_state(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        """The seed, options and actions of the current episode (encoded)."""
        actions: Any = self._actions
        if actions and all(a.shape == actions[0].shape for a in actions):
            actions = np.stack(actions)
        return {
            "seeder": encode(self._seeder, arrays),
            "seed": self._episode_seed,
            "options": encode(self._options, arrays),
            "actions": encode(actions, arrays),
        }

    def replay(self, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Bring the (fresh) env to the saved point of its episode."""
        self._seeder = decode(state["seeder"], arrays)
        seed = state["seed"]
        if seed is None:  # the env had not been reset when the checkpoint was written
            return
        options = decode(state["options"], arrays)
        actions = list(decode(state["actions"], arrays))
        self.env.reset(seed=int(seed), options=options)
        for i, action in enumerate(actions):
            out = self.env.step(action)  # a 5-tuple, or Safety-Gymnasium's 6-tuple with cost
            terminated, truncated = out[-3], out[-2]
            if (terminated or truncated) and i < len(actions) - 1:
                raise DataError(
                    f"replaying the saved episode (seed {seed}) ended it after {i + 1} of "
                    f"{len(actions)} steps: the env is not deterministic given its seed"
                )
        self._episode_seed, self._options = int(seed), options
        self._actions = [np.asarray(a) for a in actions]


def vec_layers(venv: Any) -> tuple[Any, list[Any]]:
    """``(base vec env, [its wrappers, outermost first])`` of an SB3 vec env stack."""
    layers = []
    while hasattr(venv, "venv"):
        layers.append(venv)
        venv = venv.venv
    return venv, layers


def _env_chain(env: Any) -> tuple[list[Any], EpisodeLog | None]:
    """The wrappers above the :class:`EpisodeLog` (outermost first), and the log itself."""
    chain: list[Any] = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, EpisodeLog):
            return chain, env
        chain.append(env)
        env = env.env
    return chain, None


def capture_venv(
    venv: Any, arrays: dict[str, np.ndarray], shared: frozenset[int] = frozenset()
) -> dict[str, Any]:
    """The state of an SB3 vec env stack: its wrappers and, for in-process envs, each env."""
    base, layers = vec_layers(venv)
    out: dict[str, Any] = {
        "layers": [[type(v).__name__, encode_vars(v, arrays, shared)] for v in layers],
        "base": [type(base).__name__, encode_vars(base, arrays, shared)],
        "envs": None,
    }
    envs = getattr(base, "envs", None)
    if envs is None:  # workers in other processes: their episodes restart on resume
        return out
    states = []
    for env in envs:
        chain, log = _env_chain(env)
        if log is None:
            return out
        try:
            episode = log.episode_state(arrays)
        except Unencodable:  # e.g. reset options that are not plain data
            return out
        states.append(
            {
                "wrappers": [[type(w).__name__, encode_vars(w, arrays, shared)] for w in chain],
                "episode": episode,
            }
        )
    out["envs"] = states
    return out


def _names(saved: list[Any]) -> list[str]:
    # a checkpoint written before the renames of issue 22 holds the old class names
    return [current_name(str(name)) for name, _ in saved]


def restore_venv(venv: Any, saved: dict[str, Any], arrays: dict[str, np.ndarray]) -> bool:
    """Restore :func:`capture_venv`'s state onto a freshly built stack of the same config.

    Returns:
        True when every env continues its episode exactly; False when the envs must be reset.

    Raises:
        DataError: the saved stack differs from ``venv``'s.
    """
    base, layers = vec_layers(venv)
    names = [type(v).__name__ for v in layers]
    if names != _names(saved["layers"]):
        raise DataError(
            f"the checkpoint's vector env wrappers {_names(saved['layers'])} differ from the "
            f"config's {names}"
        )
    exact = False
    envs = getattr(base, "envs", None)
    if saved.get("envs") is not None and envs is not None:
        if len(envs) != len(saved["envs"]):
            raise DataError(
                f"the checkpoint holds {len(saved['envs'])} envs, the config {len(envs)}"
            )
        for i, (env, state) in enumerate(zip(envs, saved["envs"], strict=True)):
            chain, log = _env_chain(env)
            kinds = [type(w).__name__ for w in chain]
            if log is None or kinds != _names(state["wrappers"]):
                raise DataError(
                    f"env {i}: the checkpoint's wrappers {_names(state['wrappers'])} differ "
                    f"from the config's {kinds}"
                )
            log.replay(state["episode"], arrays)
            for wrapper, (_, attrs) in zip(chain, state["wrappers"], strict=True):
                restore_vars(wrapper, attrs, arrays)
        # a checkpoint from before the Checked vector envs names SB3's DummyVecEnv
        if saved["base"][0] in {cls.__name__ for cls in type(base).__mro__}:
            restore_vars(base, saved["base"][1], arrays)
        exact = True
    for layer, (_, attrs) in zip(layers, saved["layers"], strict=True):
        restore_vars(layer, attrs, arrays)
    return exact
