"""Shaping configuration: :class:`ShapingConfig` and the default HazardNav prompt sets.

Torch-free and JSON-safe: ``ShapingConfig(**dict)`` / :meth:`ShapingConfig.to_dict` round-trip,
:meth:`ShapingConfig.coerce` takes ``None``, a dict or a config. The arithmetic these options
control is described in :mod:`gymcurric.semantics.shaper`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from gymcurric._checks import check_int, finite_reason, shown, too_large_int
from gymcurric.errors import ConfigError

__all__ = [
    "HAZARD_NAV_SAFE_PROMPTS",
    "HAZARD_NAV_UNSAFE_PROMPTS",
    "Mode",
    "ShapingConfig",
    "Source",
]

#: Default "safe" prompts, chosen for gymcurric/HazardNav-v0 and HazardGrid-v0 (captions and
#: top-down frames) and generic enough for other navigation tasks.
HAZARD_NAV_SAFE_PROMPTS: tuple[str, ...] = (
    "The path to the goal is clear.",
    "The agent is safe, far away from any hazard.",
    "The agent reached the goal.",
)
#: Default "unsafe" prompts (see :data:`HAZARD_NAV_SAFE_PROMPTS`).
HAZARD_NAV_UNSAFE_PROMPTS: tuple[str, ...] = (
    "The agent is inside a hazard.",
    "The agent is in danger, standing in a hazard.",
)

Mode = Literal["additive", "potential"]
Source = Literal["auto", "frames", "captions"]


def _items(value: Any) -> Sequence[Any] | None:
    """The items of a list-like value, or None: a sequence (not a str) as is.

    A 1-D numpy array gives its items as Python objects (``np.str_`` → ``str``, ``np.bool_`` →
    ``bool``).
    """
    if isinstance(value, np.ndarray):
        return value.tolist() if value.ndim == 1 else None
    if isinstance(value, str) or not isinstance(value, Sequence):
        return None
    return value


@dataclass(frozen=True)
class ShapingConfig:
    """Everything that configures semantic shaping (JSON-safe; ``ShapingConfig(**dict)``).

    Numbers and counts may be numpy scalars (``np.float32(0.1)``, ``np.float64``,
    ``np.int64(1000)``), kept as the Python float or int of the same value; bools and strings
    are refused. Lists (prompts, ``probe_states``, ``probe_unsafe``) may be any
    sequence or a 1-D numpy array (of str, or of bools, numpy's too), kept as a tuple of
    Python str/bool; a bare string is refused.

    Attributes:
        safe_prompts: texts describing states to nudge towards.
        unsafe_prompts: texts describing states to nudge away from.
        mode: ``"additive"`` (``r + β·m̄``) or ``"potential"`` (``r + β(gamma φ(s') - φ(s))``).
        beta_start: the shaping coefficient at step 0 (≥ 0).
        beta_end_fraction: fraction of ``total_steps`` after which β is 0, in (0, 1].
        total_steps: the training length in env steps (all envs), for the β schedule.
        gamma: the discount of potential mode, in [0, 1].
        margin_norm_enable: normalise margins by a running mean/std.
        margin_norm_window: how many recent raw margins the mean/std use.
        margin_scale: multiplies the (normalised) margin.
        clamp: ``M``: the scaled margin is clamped to ``[-M, M]`` (> 0).
        capture_interval: embed every this many vector steps (≥ 1).
        pool_k: temporal pooling over the last ``pool_k`` embeddings of an env (≥ 1).
        confidence_min: gate: ``m̄ = 0`` where ``|raw margin| < confidence_min`` (0: off).
        batch_max: the most states embedded in one call (halved on CUDA out-of-memory).
        caption_cache_size: how many distinct captions' embeddings are kept (0: no cache);
            envs with a small caption vocabulary (HazardNav has 11) then cost one dict lookup
            per state.
        source: what states are embedded from: ``"frames"`` (``env.render()``),
            ``"captions"`` (``info["caption"]`` or ``env.describe()``), ``"auto"`` (from the
            embedder's modality).
        enabled: ``False``: the wrappers pass everything through unchanged.
        probe_states: captions whose safety is known, checked at set-up: the shaper computes
            the ROC AUC with which the prompts' margins tell the unsafe ones from the others
            (:attr:`Shaper.probe_auc`) and emits a :class:`~gymcurric.errors.GymcurricWarning`
            when it is within ``probe_tolerance`` of 0.5, or below (the sets rank the states
            the wrong way round), or NaN (non-finite embeddings). Empty (default): no check.
            Captions only: for frames call :meth:`Shaper.probe` yourself.
        probe_unsafe: one bool per probe state, True for the unsafe ones (both kinds needed).
        probe_tolerance: how close to 0.5 the probe AUC may be before the warning, in [0, 0.5].
    """

    safe_prompts: tuple[str, ...] = HAZARD_NAV_SAFE_PROMPTS
    unsafe_prompts: tuple[str, ...] = HAZARD_NAV_UNSAFE_PROMPTS
    mode: Mode = "additive"
    beta_start: float = 0.05
    beta_end_fraction: float = 0.5
    total_steps: int = 1_000_000
    gamma: float = 0.99
    margin_norm_enable: bool = True
    margin_norm_window: int = 1000
    margin_scale: float = 1.0
    clamp: float = 3.0
    capture_interval: int = 1
    pool_k: int = 1
    confidence_min: float = 0.0
    batch_max: int = 64
    caption_cache_size: int = 4096
    source: Source = "auto"
    enabled: bool = True
    probe_states: tuple[str, ...] = ()
    probe_unsafe: tuple[bool, ...] = ()
    probe_tolerance: float = 0.05

    def __post_init__(self) -> None:
        src = "ShapingConfig"
        for name in ("safe_prompts", "unsafe_prompts"):
            value = getattr(self, name)
            items = _items(value)
            if items is None:
                raise ConfigError(name, value, "expected a list of strings", source=src)
            if not items or not all(isinstance(p, str) and p.strip() for p in items):
                raise ConfigError(name, value, "expected non-empty strings", source=src)
            object.__setattr__(self, name, tuple(items))
        if self.mode not in ("additive", "potential"):
            raise ConfigError("mode", self.mode, "expected 'additive' or 'potential'", source=src)
        if self.source not in ("auto", "frames", "captions"):
            raise ConfigError(
                "source", self.source, "expected 'auto', 'frames' or 'captions'", source=src
            )

        def number(name: str, lo: float, hi: float, *, lo_open: bool = False) -> None:
            value = given = getattr(self, name)
            # a numpy scalar (not a bool), np.float64 too: its value as a Python int or float,
            # as RiskHead takes one; np.float64 kept would not go through yaml.safe_dump
            plain = type(value) in (int, float) or isinstance(value, bool | np.bool_)
            if isinstance(value, numbers.Real) and not plain:
                value = int(value) if isinstance(value, numbers.Integral) else float(value)
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            # math.isfinite raises OverflowError on an int too large for a float (10**400)
            ok = ok and not too_large_int(value) and math.isfinite(value)
            if not (ok and (value > lo if lo_open else value >= lo) and value <= hi):
                bound = f"({lo}" if lo_open else f"[{lo}"
                reason = finite_reason(value, f"expected a number in {bound}, {hi}]")
                raise ConfigError(name, shown(given), reason, source=src)
            if value is not given:
                object.__setattr__(self, name, value)

        def integer(name: str, lo: int) -> None:
            value = getattr(self, name)
            check_int(
                name,
                value,
                minimum=lo,
                source=src,
                allow_numpy=True,
                reason=f"expected an int ≥ {lo}",
            )
            if not isinstance(value, int):  # a numpy integer: its value, as a Python int
                object.__setattr__(self, name, int(value))

        number("beta_start", 0.0, 1e6)
        number("beta_end_fraction", 0.0, 1.0, lo_open=True)
        number("gamma", 0.0, 1.0)
        number("margin_scale", 0.0, 1e6, lo_open=True)
        number("clamp", 0.0, 1e6, lo_open=True)
        number("confidence_min", 0.0, 2.0)
        for name in (
            "total_steps",
            "margin_norm_window",
            "capture_interval",
            "pool_k",
            "batch_max",
        ):
            integer(name, 1)
        integer("caption_cache_size", 0)
        for name in ("margin_norm_enable", "enabled"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "expected a bool", source=src)
        number("probe_tolerance", 0.0, 0.5)
        self._check_probe(src)

    def _check_probe(self, src: str) -> None:
        states, unsafe = _items(self.probe_states), _items(self.probe_unsafe)
        for name, items in (("probe_states", states), ("probe_unsafe", unsafe)):
            if items is None:
                raise ConfigError(name, getattr(self, name), "expected a list", source=src)
        assert states is not None and unsafe is not None
        if not all(isinstance(s, str) and s.strip() for s in states):
            raise ConfigError(
                "probe_states", self.probe_states, "expected non-empty strings", source=src
            )
        if not all(isinstance(u, bool | np.bool_) for u in unsafe):
            raise ConfigError("probe_unsafe", self.probe_unsafe, "expected bools", source=src)
        if len(unsafe) != len(states):
            raise ConfigError(
                "probe_unsafe",
                f"{len(unsafe)} labels",
                f"expected one per probe state ({len(states)})",
                source=src,
            )
        if states and (all(unsafe) or not any(unsafe)):
            raise ConfigError(
                "probe_unsafe",
                f"all {bool(unsafe[0])}",
                "needs both safe and unsafe states",
                source=src,
            )
        object.__setattr__(self, "probe_states", tuple(states))
        object.__setattr__(self, "probe_unsafe", tuple(bool(u) for u in unsafe))

    @classmethod
    def coerce(
        cls, value: ShapingConfig | dict[str, Any] | None, **overrides: Any
    ) -> ShapingConfig:
        """``None`` → defaults, a dict → ``ShapingConfig(**dict)``; ``overrides`` replace fields.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        if value is None:
            fields: dict[str, Any] = {}
        elif isinstance(value, ShapingConfig):
            fields = dataclasses.asdict(value)
        elif isinstance(value, dict):
            fields = dict(value)
        else:
            raise ConfigError("config", value, "expected a ShapingConfig, a dict or None")
        fields.update(overrides)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ConfigError(
                unknown[0], fields[unknown[0]], f"unknown shaping option; known: {sorted(known)}"
            )
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-safe dict (prompt tuples as lists)."""
        out = dataclasses.asdict(self)
        for name in ("safe_prompts", "unsafe_prompts", "probe_states", "probe_unsafe"):
            out[name] = list(getattr(self, name))
        return out
