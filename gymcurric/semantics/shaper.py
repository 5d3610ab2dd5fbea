"""The semantic shaper: embeddings of states → an annealed shaping term per env (numpy only).

One :class:`Shaper` serves one wrapper and holds the state of all its envs in arrays:

* **Centroids.** Each prompt set is embedded, the unit rows averaged and re-normalised:
  ``μ_safe``, ``μ_unsafe``.
* **Margin.** ``m = cos(e, μ_safe) - cos(e, μ_unsafe)`` for a state embedding ``e``; with
  ``pool_k > 1`` ``e`` is the re-normalised mean of the env's last ``pool_k`` embeddings
  (cleared at episode boundaries).
* **Normalisation.** With ``margin_norm_enable``, ``(m - mean) / std`` over the last
  ``margin_norm_window`` raw margins (all envs); then ``* margin_scale`` and clamped to
  ``±clamp``: ``m̄``. Optional confidence gating: ``m̄ = 0`` where ``|m| < confidence_min``.
* **Annealing.** ``β_t = beta_start · ½(1 + cos(π · min(1, t / (beta_end_fraction ·
  total_steps))))`` with ``t`` the env steps taken so far (all envs): ``beta_start`` at 0, 0
  from ``beta_end_fraction · total_steps`` on, so the final optimum is the original task's.
* **Modes.** ``"additive"``: ``r' = r + β_t · m̄``. ``"potential"`` (Ng et al., 1999,
  potential-based shaping keeps the optimal policy): ``r' = r + β_t (gamma φ(s') - φ(s))`` with
  ``φ = m̄``; ``φ(s_0)`` is computed at episode start, ``φ = 0`` at a true terminal (not at a
  truncation).
* **Capture interval.** States are embedded every ``capture_interval``-th vector step (all envs
  in one batch). A step without capture adds 0 (``info["shaping"] = 0.0``); in potential mode
  ``φ`` keeps its last value, so the increments still telescope. A true terminal always closes
  the episode with ``β(0 - φ(s))``.

Fail-soft: if the embedder failed to load, or an embedding call raises, the shaping term is 0,
:attr:`Shaper.status` says why (a ``RuntimeWarning`` is emitted once), and the env goes on.
Whether states are captions or frames then comes from the config's ``source``, else from the
model that was asked for (a caption model, CLIP/SigLIP), else from the env
(:meth:`Shaper.resolve_source`), never from the missing model: a caption env needs no
``render_mode``. CUDA out-of-memory errors halve :attr:`Shaper.batch_max` and retry first.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError
from gymcurric.semantics._telemetry import ShapingTelemetry
from gymcurric.semantics._window import MarginWindow
from gymcurric.semantics.base import (
    Embedder,
    FailedEmbedder,
    embedder_modality,
    empty_cuda_cache,
    is_failed,
    is_oom_error,
    stack_frames,
    unit_rows,
)
from gymcurric.semantics.config import (
    HAZARD_NAV_SAFE_PROMPTS,
    HAZARD_NAV_UNSAFE_PROMPTS,
    ShapingConfig,
    Source,
)
from gymcurric.semantics.probe import probe_separation

__all__ = [
    "HAZARD_NAV_SAFE_PROMPTS",
    "HAZARD_NAV_UNSAFE_PROMPTS",
    "Shaper",
    "ShapingConfig",
    "build_shaper",
    "is_oom_error",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def build_shaper(
    config: ShapingConfig | dict[str, Any] | None,
    embedder: Any,
    num_envs: int,
    *,
    kind: str = "auto",
    device: str = "cpu",
    dtype: str = "auto",
) -> Shaper:
    """A :class:`Shaper` for a wrapper: loads ``embedder`` fail-soft unless shaping is disabled.

    ``embedder`` is anything :func:`~gymcurric.semantics.embedders.load_embedder` takes (a model
    folder or cached hub id, an :class:`~gymcurric.semantics.base.Embedder`, a callable, or
    ``None`` for the shipped MiniLM caption model).
    """
    from gymcurric.semantics.embedders import load_embedder_soft

    cfg = ShapingConfig.coerce(config)
    if not cfg.enabled:
        return Shaper(cfg, FailedEmbedder("failed: shaping disabled"), num_envs)
    return Shaper(cfg, load_embedder_soft(embedder, kind, device=device, dtype=dtype), num_envs)


InputsFn = Callable[[], Sequence[Any]]


class Shaper:
    """Semantic shaping state and arithmetic for ``num_envs`` envs (numpy arrays).

    The wrappers call :meth:`begin` when envs (re)start and :meth:`step` once per vector step;
    both take a zero-argument function returning the current per-env inputs (frames or
    captions), called only when something is embedded this step.

    Args:
        config: the :class:`ShapingConfig`.
        embedder: an :class:`~gymcurric.semantics.base.Embedder`; a failed one (``status``
            starting with ``"failed"``) makes every shaping term 0.
        num_envs: how many envs share this shaper (an int, a numpy integer too).

    Examples:
        >>> import numpy as np
        >>> from gymcurric.semantics import CallableEmbedder
        >>> words = lambda t: np.array([[1.0, 0.1] if "hazard" in s else [0.1, 1.0] for s in t])
        >>> cfg = ShapingConfig(safe_prompts=("clear",), unsafe_prompts=("hazard",),
        ...                     margin_norm_enable=False, beta_start=1.0)
        >>> shaper = Shaper(cfg, CallableEmbedder(texts=words), num_envs=2)
        >>> shaper.margins(["in a hazard", "all clear"]).round(3).tolist()
        [-0.802, 0.802]
        >>> shaper.begin(np.ones(2, bool), lambda: ["clear", "clear"])
        >>> shaper.step(np.zeros(2), np.zeros(2, bool), np.zeros(2, bool),
        ...             lambda: ["hazard", "clear"]).round(3).tolist()
        [-0.802, 0.802]
    """

    def __init__(self, config: ShapingConfig, embedder: Embedder, num_envs: int = 1) -> None:
        if not isinstance(config, ShapingConfig):
            raise ConfigError("config", config, "expected a ShapingConfig", source="Shaper")
        check_int("num_envs", num_envs, source="Shaper", allow_numpy=True)  # np.int64(2) too
        self.config = config
        self.embedder = embedder
        self.num_envs = n = int(num_envs)
        self.batch_max = config.batch_max
        self.source: Source = config.source
        # a model that failed to load says what it would have embedded, when known; else the
        # source stays "auto" until the wrapper sees whether the env writes captions
        # (resolve_source): a caption env must not be asked for frames it cannot render
        known = not is_failed(embedder) or getattr(embedder, "modality", None) is not None
        if config.source == "auto" and known:
            self.source = "captions" if embedder_modality(embedder) == "text" else "frames"
        self.ok = False
        self.status = str(getattr(embedder, "status", "ok"))
        self.centroids = np.zeros((2, 0), dtype=np.float32)
        self.dim = 0
        # Per-env state.
        self.phi = np.zeros(n, dtype=np.float64)
        self.pool_len = np.zeros(n, dtype=np.int64)
        self.pool_pos = np.zeros(n, dtype=np.int64)
        self.pool = np.zeros((n, config.pool_k, 0), dtype=np.float32)
        # Normalisation window (all envs).
        self.window = MarginWindow(config.margin_norm_window)
        # Read-only masks for the common "every env valid, no episode start" step.
        self._all = np.ones(n, dtype=bool)
        self._none = np.zeros(n, dtype=bool)
        self._all.flags.writeable = self._none.flags.writeable = False
        self._margin_dir = np.zeros(0, dtype=np.float32)
        # Counters.
        self.env_steps = 0
        self.vector_steps = 0
        self.capture_count = 0
        self.embed_failures = 0
        self.oom_events = 0
        self.last_captured = np.zeros(n, dtype=bool)
        self._caption_cache: dict[str, np.ndarray] = {}
        self._warned = False
        self._telemetry = ShapingTelemetry()
        self.probe_auc: float | None = None
        if not config.enabled:
            self.status = "disabled"
            return
        if is_failed(embedder):
            self._fail(self.status)
            return
        try:
            safe = unit_rows(embedder.embed_texts(list(config.safe_prompts)))
            unsafe = unit_rows(embedder.embed_texts(list(config.unsafe_prompts)))
            if not (np.isfinite(safe).all() and np.isfinite(unsafe).all()):
                raise FloatingPointError("non-finite prompt embeddings")
        except Exception as exc:
            self._fail(f"failed: prompt embedding: {type(exc).__name__}: {exc}")
            return
        self.centroids = unit_rows(np.stack([safe.mean(0), unsafe.mean(0)]))
        self.dim = int(self.centroids.shape[1])
        # cos(e, μ_safe) - cos(e, μ_unsafe) = e · (μ_safe - μ_unsafe) for unit e: one matvec
        self._margin_dir = self.centroids[0] - self.centroids[1]
        self.pool = np.zeros((n, config.pool_k, self.dim), dtype=np.float32)
        self.ok = True
        if config.probe_states and self.source != "captions":
            raise ConfigError("probe_states", "captions", "shaper embeds frames", source="Shaper")
        if config.probe_states:
            try:  # fail-soft, as the prompts' embedding above; a warning made an error is raised
                self.probe(config.probe_states, config.probe_unsafe, config.probe_tolerance)
            except Warning:
                raise
            except Exception as exc:
                self._fail(f"failed: probe states: {type(exc).__name__}: {exc}")

    @property
    def window_count(self) -> int:
        """How many raw margins the normalisation window holds."""
        return self.window.count

    def resolve_source(self, captions: bool) -> None:
        """Settle a source still ``"auto"`` from the env: captions if it has them, else frames.

        Only a shaper whose model failed to load, and did not say what it would have embedded,
        is still ``"auto"``; the wrappers call this with whether the env writes
        ``info["caption"]`` (or has ``describe()``). Otherwise nothing changes.
        """
        if self.source == "auto":
            self.source = "captions" if captions else "frames"

    # ------------------------------------------------------------------------------ helpers
    def _fail(self, status: str) -> None:
        self.ok = False
        self.status = status
        self._warn(status)

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"semantic shaping: {message}; the shaping term is 0 until this is fixed",
                RuntimeWarning,
                stacklevel=4,
            )

    def beta(self, env_steps: int | None = None) -> float:
        """β after ``env_steps`` env steps (default: the steps taken so far)."""
        t = self.env_steps if env_steps is None else env_steps
        cfg = self.config
        end = cfg.beta_end_fraction * cfg.total_steps
        progress = min(1.0, t / end)
        return float(cfg.beta_start * 0.5 * (1.0 + math.cos(math.pi * progress)))

    def embed(self, inputs: Sequence[Any]) -> np.ndarray:
        """Embed states (frames or captions) in chunks of :attr:`batch_max`; ``(n, dim)``.

        A CUDA out-of-memory error sets :attr:`batch_max` to half the failed chunk (counted in
        ``oom_events``) and retries; an out-of-memory error on a single state is raised.
        Captions already seen are taken from a cache (``caption_cache_size``), as embedding a
        string is a pure function.
        """
        size = self.config.caption_cache_size
        if self.source != "captions" or size == 0:
            return self._embed_chunks(inputs)
        keys = [str(x) for x in inputs]
        cache = self._caption_cache
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = {k: cache[k] for k in dict.fromkeys(keys) if k in cache}
        missing = [k for k in dict.fromkeys(keys) if k not in rows]
        if missing:
            for key, row in zip(missing, self._embed_chunks(missing), strict=True):
                rows[key] = row
                if len(cache) >= size:
                    del cache[next(iter(cache))]  # oldest first
                cache[key] = row
        return np.stack([rows[k] for k in keys])

    def _embed_chunks(self, inputs: Sequence[Any]) -> np.ndarray:
        if self.source == "captions":
            fn: Callable[[Any], np.ndarray] = self.embedder.embed_texts
        else:
            fn = self.embedder.embed_images
        out: list[np.ndarray] = []
        i = 0
        while i < len(inputs):
            b = self.batch_max
            chunk: Any = inputs[i : i + b]
            if not isinstance(chunk, np.ndarray):
                chunk = stack_frames(chunk) if self.source == "frames" else list(chunk)
            try:
                rows = fn(chunk)
            except Exception as exc:
                if len(chunk) > 1 and is_oom_error(exc):
                    self.batch_max = max(1, len(chunk) // 2)
                    self.oom_events += 1
                    empty_cuda_cache()
                    continue
                raise
            out.append(np.asarray(rows, dtype=np.float32).reshape(len(chunk), -1))
            i += b
        if not out:
            return np.zeros((0, self.dim), dtype=np.float32)
        return unit_rows(np.concatenate(out))

    def margins(self, inputs: Sequence[Any]) -> np.ndarray:
        """Raw margins ``cos(e, μ_safe) - cos(e, μ_unsafe)`` of states, without any state change.

        For probes and tests; raises if the embedder fails.
        """
        if not self.ok:
            raise RuntimeError(f"the shaper is not usable: {self.status}")
        return self._raw_margins(self.embed(inputs))

    def probe(self, states: Sequence[Any], unsafe: Any, tolerance: float = 0.05) -> float:
        """ROC AUC of known states' margins, as :attr:`probe_auc`; warns if ≈ 0.5, below or NaN.

        See :func:`~gymcurric.semantics.probe.probe_separation`; ``unsafe`` labels the states.
        Set-up runs it on ``config.probe_states`` (captions).
        """
        c, m = self.config, self.margins(states)
        sets = f"the prompt sets {list(c.safe_prompts)} / {list(c.unsafe_prompts)}"
        self.probe_auc = probe_separation(m, unsafe, tolerance, what=sets, stacklevel=3)
        return self.probe_auc

    def _raw_margins(self, e: np.ndarray) -> FloatArray:
        return (e @ self._margin_dir).astype(np.float64)

    def _push_pool(self, idx: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Append embeddings of envs ``idx`` to their pools; return the pooled unit vectors."""
        k = self.config.pool_k
        if k == 1:
            self.pool_len[idx] = 1
            return e
        self.pool[idx, self.pool_pos[idx]] = e
        self.pool_pos[idx] = (self.pool_pos[idx] + 1) % k
        self.pool_len[idx] = np.minimum(self.pool_len[idx] + 1, k)
        # Empty slots are zero rows (cleared at boundaries), so the sum is over the filled ones.
        return unit_rows(self.pool[idx].sum(axis=1))

    def _clear(self, mask: BoolArray) -> None:
        self.pool_len[mask] = 0
        self.pool_pos[mask] = 0
        if self.config.pool_k > 1:
            self.pool[mask] = 0.0
        self.phi[mask] = 0.0

    def _normalise(self, raw: FloatArray) -> FloatArray:
        cfg = self.config
        if raw.size == 0:
            return raw.copy()
        if cfg.margin_norm_enable:
            self.window.push(raw)
            mean, std = self.window.mean_std()
            z = (raw - mean) / max(std, 1e-8)
        else:
            z = raw.copy()
        z *= cfg.margin_scale
        clamped = np.abs(z) > cfg.clamp
        np.clip(z, -cfg.clamp, cfg.clamp, out=z)
        if cfg.confidence_min > 0:
            z[np.abs(raw) < cfg.confidence_min] = 0.0
        self._telemetry.add_margins(raw, z, clamped)
        return z

    def _embed_soft(self, inputs: Sequence[Any]) -> np.ndarray | None:
        if not isinstance(inputs, np.ndarray) and any(x is None for x in inputs):
            what = (
                "caption (info['caption'] or describe())" if self.source == "captions" else "frame"
            )
            raise ConfigError(
                "source",
                self.source,
                f"the env gave no {what} for a state that must be embedded",
                source="Shaper",
            )
        t0 = time.perf_counter()
        try:
            e = self.embed(inputs)
            if e.shape != (len(inputs), self.dim) or not np.isfinite(e).all():
                raise FloatingPointError(f"bad embeddings (shape {e.shape}, non-finite values?)")
        except Exception as exc:
            self.embed_failures += 1
            self.status = (
                f"error: {self.embed_failures} embedding call(s) failed, last: "
                f"{type(exc).__name__}: {exc}"[:300]
            )
            self._warn(self.status)
            return None
        self._telemetry.add_call((time.perf_counter() - t0) * 1000.0)
        self.capture_count += len(inputs)
        return e

    # ------------------------------------------------------------------------------- API
    def begin(self, mask: BoolArray, get_inputs: InputsFn | None = None) -> None:
        """Envs in ``mask`` start an episode: clear pools and ``φ``; potential mode: ``φ(s_0)``.

        Args:
            mask: ``(num_envs,)`` bool.
            get_inputs: returns the per-env inputs of the start states (all envs); needed in
                potential mode (else ``φ(s_0) = 0``).
        """
        mask = np.asarray(mask, dtype=bool)
        self._clear(mask)
        if not (self.ok and self.config.mode == "potential" and mask.any() and get_inputs):
            return
        idx = np.flatnonzero(mask)
        e = self._embed_soft(self._gather(get_inputs, None, self._none, idx, idx[:0]))
        if e is None:
            return
        pooled = self._push_pool(idx, e)
        self.phi[idx] = self._normalise(self._raw_margins(pooled))

    def step(
        self,
        rewards: npt.ArrayLike,
        terminated: npt.ArrayLike,
        truncated: npt.ArrayLike,
        get_inputs: InputsFn,
        *,
        valid: npt.ArrayLike | None = None,
        starts: npt.ArrayLike | None = None,
        get_final_inputs: Callable[[], Sequence[Any] | None] | None = None,
    ) -> FloatArray:
        """The shaping term of each env for one vector step (0 where nothing applies).

        Args:
            rewards: the raw rewards (for the shaping/reward ratio statistic).
            terminated: true terminals (``φ(s') = 0`` in potential mode).
            truncated: truncations.
            get_inputs: returns the current per-env inputs (frames or captions).
            valid: envs whose step is a real transition (``False`` for a ``NEXT_STEP``
                autoreset step: shaping 0); default all.
            starts: envs whose *current* input is a new episode's first state (``NEXT_STEP``
                reset steps, or envs that ended under ``SAME_STEP`` autoreset); they are
                :meth:`begin`-ed after their transition is shaped.
            get_final_inputs: for ``starts`` envs that made a real transition, returns the
                inputs of their final states (per env, ``None`` where unknown), e.g. captions
                from ``info["final_info"]``; where unknown, a non-terminal final state reuses
                the last ``φ`` (potential mode) or adds 0 (additive mode).

        Returns:
            ``(num_envs,)`` float64 shaping terms.
        """
        n, cfg = self.num_envs, self.config
        rewards = np.asarray(rewards, dtype=np.float64).reshape(n)
        terminated = np.asarray(terminated, dtype=bool).reshape(n)
        truncated = np.asarray(truncated, dtype=bool).reshape(n)
        valid_m = self._all if valid is None else np.asarray(valid, bool).reshape(n)
        starts_m = self._none if starts is None else np.asarray(starts, bool).reshape(n)
        all_valid = valid_m is self._all or bool(valid_m.all())
        any_start = starts_m is not self._none and bool(starts_m.any())
        shaping = np.zeros(n, dtype=np.float64)
        beta = self.beta()
        self.env_steps += n if all_valid else int(valid_m.sum())
        capture_now = self.vector_steps % cfg.capture_interval == 0
        self.vector_steps += 1
        if not self.ok:
            self.last_captured = np.zeros(n, dtype=bool)
            self._account(rewards, shaping, valid_m, all_valid)
            return shaping
        potential = cfg.mode == "potential"
        # Which transitions get embedded, and from which inputs.
        want = valid_m.copy() if capture_now else np.zeros(n, bool)
        if potential:
            want &= ~terminated  # φ = 0 at a true terminal: nothing to embed
        final: Sequence[Any] | None = None
        if any_start and (want & starts_m).any():
            final = get_final_inputs() if get_final_inputs is not None else None
            if final is None:
                want &= ~starts_m
            else:
                want &= ~starts_m | np.array([f is not None for f in final], dtype=bool)
        trans_idx = np.flatnonzero(want)
        start_idx = np.flatnonzero(starts_m) if potential and any_start else trans_idx[:0]
        phi_new = self.phi.copy()
        captured = np.zeros(n, bool)
        start_e: np.ndarray | None = None
        if trans_idx.size or start_idx.size:
            e = self._embed_soft(self._gather(get_inputs, final, starts_m, trans_idx, start_idx))
            if e is not None:
                pooled = self._push_pool(trans_idx, e[: trans_idx.size])
                captured[trans_idx] = True
                phi_new[trans_idx] = self._normalise(self._raw_margins(pooled))
                start_e = e[trans_idx.size :]
        if potential:
            phi_new[terminated & valid_m] = 0.0
            closing = valid_m & (captured | terminated)
            shaping[closing] = beta * (cfg.gamma * phi_new[closing] - self.phi[closing])
            if all_valid:
                self.phi = phi_new
            else:
                self.phi[valid_m] = phi_new[valid_m]
        else:
            shaping[captured] = beta * phi_new[captured]
        self.last_captured = captured
        # Episode boundaries: clear pools and φ; potential mode: φ(s_0) of the new episodes.
        ends = terminated | truncated
        if not all_valid:
            ends &= valid_m
        if any_start:
            ends |= starts_m
        if ends.any():
            self._clear(ends)
        if start_idx.size and start_e is not None:
            pooled = self._push_pool(start_idx, start_e)
            self.phi[start_idx] = self._normalise(self._raw_margins(pooled))
        self._account(rewards, shaping, valid_m, all_valid)
        return shaping

    def _gather(
        self,
        get_inputs: InputsFn,
        final: Sequence[Any] | None,
        starts_m: BoolArray,
        trans_idx: np.ndarray,
        start_idx: np.ndarray,
    ) -> Any:
        """The states to embed, as one batch.

        Those of the ``trans_idx`` envs (the final state for envs that just restarted), then
        the current states of the ``start_idx`` envs. An array of frames stays an array (the
        array itself when every env is taken, in order).
        """
        no_final = np.zeros(trans_idx.size, dtype=bool)
        from_final = no_final if final is None else starts_m[trans_idx]
        need_current = start_idx.size > 0 or not from_final.all()
        current: Sequence[Any] = get_inputs() if need_current else ()
        if not from_final.any():
            if isinstance(current, np.ndarray):
                if start_idx.size == 0 and trans_idx.size == self.num_envs:
                    return current
                return current[np.concatenate([trans_idx, start_idx])]
            return [current[i] for i in trans_idx.tolist() + start_idx.tolist()]
        assert final is not None
        batch = [
            final[i] if f else current[i]
            for i, f in zip(trans_idx.tolist(), from_final.tolist(), strict=True)
        ]
        return batch + [current[i] for i in start_idx.tolist()]

    # -------------------------------------------------------------------------- telemetry
    def _account(
        self, rewards: FloatArray, shaping: FloatArray, valid: BoolArray, all_valid: bool
    ) -> None:
        if all_valid:
            self._telemetry.add_steps(rewards, shaping)
        else:
            self._telemetry.add_steps(rewards[valid], shaping[valid])

    def stats(self, reset: bool = True) -> dict[str, float | str]:
        """Telemetry under ``semantics/…`` names, averaged since the last ``stats()`` call.

        Keys: ``beta``, ``raw_margin`` and ``norm_margin`` (means over the captured states),
        ``clamp_frac`` (share of captured margins that hit ``±clamp``), ``capture_count``
        (states embedded so far), ``embed_latency_ms`` (mean per embedding call),
        ``shaping_reward_ratio`` (``Σ|shaping| / Σ|raw reward|``), ``shaping_std`` (std of the
        shaping term over all steps), ``batch_max``, ``oom_events``, ``embed_failures`` and
        ``status`` (a string). Quantities with no new data repeat their last value.

        Args:
            reset: start a new averaging interval.
        """
        last = self._telemetry.means()
        out: dict[str, float | str] = {
            "semantics/beta": self.beta(),
            **{f"semantics/{k}": float(v) for k, v in last.items()},
            "semantics/capture_count": float(self.capture_count),
            "semantics/batch_max": float(self.batch_max),
            "semantics/oom_events": float(self.oom_events),
            "semantics/embed_failures": float(self.embed_failures),
            "semantics/status": self.status,
        }
        if reset:
            self._telemetry.reset()
        return out

    # ------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The shaper's state as arrays and numbers (the embedder is not included)."""
        return {
            "phi": self.phi.copy(),
            "pool": self.pool.copy(),
            "pool_len": self.pool_len.copy(),
            "pool_pos": self.pool_pos.copy(),
            **self.window.state_dict(),
            "env_steps": self.env_steps,
            "vector_steps": self.vector_steps,
            "capture_count": self.capture_count,
            "batch_max": self.batch_max,
            "config": self.config.to_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (same ``num_envs`` and embedding size)."""
        if np.shape(state["phi"]) != self.phi.shape or np.shape(state["pool"]) != self.pool.shape:
            raise ConfigError(
                "state",
                f"phi {np.shape(state['phi'])}, pool {np.shape(state['pool'])}",
                f"expected phi {self.phi.shape}, pool {self.pool.shape}",
                source="Shaper.load_state_dict",
            )
        self.phi[:] = state["phi"]
        self.pool[:] = state["pool"]
        self.pool_len[:] = state["pool_len"]
        self.pool_pos[:] = state["pool_pos"]
        self.window.load_state_dict(state)
        self.env_steps = int(state["env_steps"])
        self.vector_steps = int(state["vector_steps"])
        self.capture_count = int(state["capture_count"])
        self.batch_max = int(state["batch_max"])
