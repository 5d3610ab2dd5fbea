"""A small float32 MLP that predicts the discounted cost-to-go ("risk"), trained online (torch).

The head sees feature vectors (frame/caption embeddings or flattened observations) and regresses
the horizon-``H`` cost-to-go targets of :mod:`gymcurric.safety.risk_targets` with SmoothL1.
Samples go into a bounded FIFO buffer; :meth:`RiskHead.train` runs ``risk_update_iters``
minibatches of ``risk_batch_size`` drawn with the head's own ``torch.Generator`` once the buffer
holds ``risk_min_samples``.

Fail-soft: a non-finite feature entry is replaced by 0, a sample with a non-finite target is
dropped, a non-finite prediction is reported as 0 and a minibatch with a non-finite loss is
skipped (no optimiser step); each case adds to ``risk/nan_events`` and nothing non-finite ever
reaches the weights. Inputs are standardised with running mean/variance (updated from the
training samples, clipped to ±10), so raw observations of any scale work.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from gymcurric._checks import check_int, finite_reason, is_finite_number, shown, too_large_int
from gymcurric.errors import ConfigError

__all__ = ["RiskAnnotator", "RiskHead"]

_CLIP = 10.0
_EVAL_MAX = 4096  # fresh samples kept for the held-out metrics between two train() calls


#: the seeds torch's generators take, -2**63 to 2**64 - 1, less one: the head seeds two (seed + 1)
_SEED_RANGE = (-(2**63), 2**64 - 2)


def _seed(value: Any, source: str) -> int:
    """``value`` as a seed: an int (numpy's too, not a bool) that torch's generators take."""
    low, high = _SEED_RANGE
    ok = not isinstance(value, bool) and isinstance(value, int | np.integer)
    if not (ok and low <= value <= high):
        reason = "must be an integer from -2**63 to 2**64 - 2 (the head seeds seed and seed + 1)"
        raise ConfigError("seed", shown(value), reason, source=source)
    return int(value)


def _plain(value: Any) -> Any:
    """A numpy real scalar (``np.float32(1e-3)``, not a bool) as its Python number, else itself."""
    if isinstance(value, np.integer):
        return int(value)
    return float(value) if isinstance(value, np.floating) else value


def _zeros(name: str, shape: tuple[int, ...], source: str = "RiskHead") -> npt.NDArray[np.float32]:
    """``np.zeros(shape, float32)``, or a ConfigError naming ``name`` when numpy cannot have it."""
    try:  # 10**400 rows: ValueError 'Maximum allowed dimension exceeded'; 10**12: MemoryError
        return np.zeros(shape, dtype=np.float32)
    except (ValueError, MemoryError) as exc:
        reason = f"too large for a float32 array ({exc})"
        raise ConfigError(name, shown(shape[0]), reason, source=source) from None


def _positive_int(name: str, value: Any, minimum: int = 1, source: str = "RiskHead") -> int:
    reason = f"must be an integer >= {minimum}"
    check_int(name, value, minimum=minimum, source=source, allow_numpy=True, reason=reason)
    return int(value)


class RiskHead:
    """Online risk regressor: ``predict(features) -> risk`` and ``add_samples`` / ``train``.

    Metrics (:meth:`stats`): ``risk/loss`` (mean SmoothL1 of the last :meth:`train`),
    ``risk/corr``, ``risk/pred_mean`` and ``risk/target_mean`` (Pearson correlation and means
    over the last ``metric_window`` samples, each predicted at the first :meth:`train` after it
    was added, *before* training on it, so held out; NaN when undefined),
    ``risk/train_samples`` (samples accepted so far) and ``risk/nan_events``.

    Args:
        input_dim: feature size ``d``.
        hidden: hidden layer sizes (ReLU).
        risk_lr: Adam learning rate (> 0; a numpy number too, as the Python one it equals).
        risk_min_samples: buffer size before the first update.
        risk_batch_size: minibatch size.
        risk_update_iters: minibatches per :meth:`train` call.
        buffer_size: the most samples kept (oldest dropped first).
        smooth_l1_beta: the SmoothL1 (Huber) transition point (> 0; a numpy number too).
        grad_clip: max gradient norm (> 0; a numpy number too).
        metric_window: held-out (prediction, target) pairs the metrics are computed over.
        seed: seeds the weight init and the minibatch generator.
        device: torch device of the MLP (features and targets stay on the host).

    Examples:
        >>> import numpy as np
        >>> head = RiskHead(2, risk_min_samples=8, risk_batch_size=8, seed=0)
        >>> x = np.random.default_rng(0).normal(size=(32, 2)).astype(np.float32)
        >>> head.add_samples(x, x[:, 0] ** 2)
        32
        >>> _ = head.train()
        >>> head.predict(x).shape, head.stats()["risk/train_samples"]
        ((32,), 32)
    """

    def __init__(
        self,
        input_dim: int,
        *,
        hidden: Sequence[int] = (64, 64),
        risk_lr: float = 1e-3,
        risk_min_samples: int = 256,
        risk_batch_size: int = 128,
        risk_update_iters: int = 4,
        buffer_size: int = 50_000,
        smooth_l1_beta: float = 1.0,
        grad_clip: float = 10.0,
        metric_window: int = 1024,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        self.input_dim = _positive_int("input_dim", input_dim)
        if not isinstance(hidden, Iterable):
            raise ConfigError("hidden", shown(hidden), "expected a list of ints", source="RiskHead")
        self.hidden = tuple(_positive_int("hidden", h) for h in hidden)
        for name, given in (("risk_lr", risk_lr), ("smooth_l1_beta", smooth_l1_beta)):
            # is_finite_number: an int too large for a float is refused, not an OverflowError
            if not (is_finite_number(value := _plain(given)) and value > 0):
                reason = finite_reason(value, "must be a finite number > 0")
                raise ConfigError(name, shown(given), reason, source="RiskHead")
        number = isinstance(clip := _plain(grad_clip), int | float) and not isinstance(clip, bool)
        if not (number and not too_large_int(clip) and clip > 0):
            reason = finite_reason(clip, "must be > 0")
            raise ConfigError("grad_clip", shown(grad_clip), reason, source="RiskHead")
        self.risk_lr = float(risk_lr)
        self.risk_min_samples = _positive_int("risk_min_samples", risk_min_samples)
        self.risk_batch_size = _positive_int("risk_batch_size", risk_batch_size)
        self.risk_update_iters = _positive_int("risk_update_iters", risk_update_iters)
        self.buffer_size = _positive_int("buffer_size", buffer_size)
        self.metric_window = _positive_int("metric_window", metric_window)
        self.smooth_l1_beta = float(smooth_l1_beta)
        self.grad_clip = float(grad_clip)
        self.seed = _seed(seed, "RiskHead")
        self.device = torch.device(device)

        init_gen = torch.Generator().manual_seed(self.seed)
        layers: list[nn.Module] = []
        width = self.input_dim
        with torch.random.fork_rng(devices=[]):  # nn.Linear's own init draws from the global RNG
            for h in self.hidden:
                layers += [nn.Linear(width, h), nn.ReLU()]
                width = h
            layers.append(nn.Linear(width, 1))
        self.model = nn.Sequential(*layers)
        with torch.no_grad():  # PyTorch's default bounds, drawn from the head's own generator
            for layer in self.model:
                if isinstance(layer, nn.Linear):
                    bound = 1.0 / math.sqrt(layer.in_features)
                    for p in (layer.weight, layer.bias):
                        p.copy_(torch.empty(p.shape).uniform_(-bound, bound, generator=init_gen))
        self.model.to(device=self.device, dtype=torch.float32)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.risk_lr)
        self.generator = torch.Generator().manual_seed(self.seed + 1)

        self._x = _zeros("buffer_size", (self.buffer_size, self.input_dim))
        self._y = _zeros("buffer_size", (self.buffer_size,))
        self._size = 0
        self._pos = 0
        # running input statistics (float64, Chan's parallel update)
        self._count = 0.0
        self._mean = np.zeros(self.input_dim)
        self._m2 = np.zeros(self.input_dim)
        self._shift: npt.NDArray[np.float32] | None = None
        self._scale: npt.NDArray[np.float32] | None = None
        self._refresh_weights()
        self._eval_pred = _zeros("metric_window", (self.metric_window,))
        self._eval_y = _zeros("metric_window", (self.metric_window,))
        self._eval_pos = self._eval_len = 0
        self._fresh_x: list[npt.NDArray[np.float32]] = []
        self._fresh_y: list[npt.NDArray[np.float32]] = []
        self.train_samples = 0
        self.updates = 0
        self.nan_events = 0
        self.last: dict[str, float] = {
            "risk/loss": float("nan"),
            "risk/corr": float("nan"),
            "risk/pred_mean": float("nan"),
            "risk/target_mean": float("nan"),
        }

    # -- inputs ------------------------------------------------------------------------------
    def _sanitise(self, features: npt.ArrayLike) -> npt.NDArray[np.float32]:
        x = np.asarray(features, dtype=np.float32).reshape(-1, self.input_dim)
        bad = ~np.isfinite(x)
        if bad.any():
            self.nan_events += int(np.any(bad, axis=1).sum())
            x = np.where(bad, np.float32(0.0), x)
        return x

    def _refresh_norm(self) -> None:
        if self._count > 1:
            self._shift = self._mean.astype(np.float32)
            self._scale = (1.0 / (np.sqrt(self._m2 / self._count) + 1e-6)).astype(np.float32)
        else:
            self._shift = self._scale = None

    def _np_normalise(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        if self._shift is None or self._scale is None:
            return x
        y = (x - self._shift) * self._scale
        return np.clip(y, -_CLIP, _CLIP, out=y)

    def _normalise(self, x: npt.NDArray[np.float32]) -> torch.Tensor:
        y = np.ascontiguousarray(self._np_normalise(x), dtype=np.float32)
        return torch.from_numpy(y).to(self.device)

    def _refresh_weights(self) -> None:
        # Inference runs on a host copy of the (tiny) weights: a numpy forward of a 64x64 MLP
        # on one row costs a few microseconds, torch's per-module dispatch tens of them.
        self._layers = [
            (
                layer.weight.detach().float().cpu().numpy().T.copy(),
                layer.bias.detach().float().cpu().numpy().copy(),
            )
            for layer in self.model
            if isinstance(layer, nn.Linear)
        ]

    # -- inference ---------------------------------------------------------------------------
    def predict(self, features: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Predict the risk of ``features`` (``[n, d]`` or ``[d]``); returns ``[n]`` float32.

        One forward of the MLP on the host (a numpy copy of the weights, refreshed after every
        :meth:`train`), whatever ``device`` the head trains on.
        """
        h = self._np_normalise(self._sanitise(features))
        last = len(self._layers) - 1
        for i, (w, b) in enumerate(self._layers):
            h = h @ w
            h += b
            if i < last:
                np.maximum(h, 0.0, out=h)
        out = np.ascontiguousarray(h[:, 0], dtype=np.float32)
        bad = ~np.isfinite(out)
        if bad.any():
            self.nan_events += int(bad.sum())
            out[bad] = 0.0
        return out

    # -- learning ----------------------------------------------------------------------------
    def add_samples(self, features: npt.ArrayLike, targets: npt.ArrayLike) -> int:
        """Add ``(features [n, d], targets [n])`` to the buffer; returns how many were kept."""
        x = self._sanitise(features)
        y = np.asarray(targets, dtype=np.float32).reshape(-1)
        if y.shape[0] != x.shape[0]:
            raise ConfigError(
                "targets", y.shape, f"expected {x.shape[0]} targets for {x.shape[0]} feature rows"
            )
        ok = np.isfinite(y)
        if not ok.all():
            self.nan_events += int((~ok).sum())
            x, y = x[ok], y[ok]
        n = x.shape[0]
        if n == 0:
            return 0
        # running statistics
        b_mean = x.mean(axis=0, dtype=np.float64)
        b_m2 = ((x - b_mean) ** 2).sum(axis=0, dtype=np.float64)
        total = self._count + n
        delta = b_mean - self._mean
        self._mean = self._mean + delta * n / total
        self._m2 = self._m2 + b_m2 + delta**2 * self._count * n / total
        self._count = total
        self._refresh_norm()
        # ring buffer
        keep = min(n, self.buffer_size)
        idx = (self._pos + np.arange(keep)) % self.buffer_size
        self._x[idx] = x[n - keep :]
        self._y[idx] = y[n - keep :]
        self._pos = int((self._pos + keep) % self.buffer_size)
        self._size = min(self._size + keep, self.buffer_size)
        self.train_samples += n
        if sum(len(f) for f in self._fresh_y) < _EVAL_MAX:
            self._fresh_x.append(x)
            self._fresh_y.append(y)
        return n

    @property
    def buffer_len(self) -> int:
        """Samples currently held."""
        return self._size

    def _evaluate_fresh(self) -> None:
        if not self._fresh_y:
            return
        x = np.concatenate(self._fresh_x)[:_EVAL_MAX]
        y = np.concatenate(self._fresh_y)[:_EVAL_MAX]
        self._fresh_x, self._fresh_y = [], []
        pred = self.predict(x)
        # held-out pairs (predicted before any training on them) in a ring of metric_window
        n = min(y.shape[0], self.metric_window)
        idx = (self._eval_pos + np.arange(n)) % self.metric_window
        self._eval_pred[idx] = pred[-n:]
        self._eval_y[idx] = y[-n:]
        self._eval_pos = int((self._eval_pos + n) % self.metric_window)
        self._eval_len = min(self._eval_len + n, self.metric_window)
        p = self._eval_pred[: self._eval_len].astype(np.float64)
        t = self._eval_y[: self._eval_len].astype(np.float64)
        self.last["risk/pred_mean"] = float(p.mean())
        self.last["risk/target_mean"] = float(t.mean())
        if t.size > 1 and p.std() > 0 and t.std() > 0:
            self.last["risk/corr"] = float(np.corrcoef(p, t)[0, 1])
        else:
            self.last["risk/corr"] = float("nan")

    def train(self) -> dict[str, float] | None:
        """Run ``risk_update_iters`` minibatch updates if enough samples; return :meth:`stats`.

        Returns ``None`` (and trains nothing) while fewer than ``risk_min_samples`` are held.
        """
        self._evaluate_fresh()
        if self._size < self.risk_min_samples:
            return None
        self.model.train()
        losses = []
        for _ in range(self.risk_update_iters):
            idx = torch.randint(
                0, self._size, (min(self.risk_batch_size, self._size),), generator=self.generator
            ).numpy()
            x = self._normalise(self._x[idx])
            y = torch.from_numpy(self._y[idx]).to(self.device)
            loss = nn.functional.smooth_l1_loss(self.model(x)[:, 0], y, beta=self.smooth_l1_beta)
            if not torch.isfinite(loss):
                self.nan_events += 1
                continue
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
            if not torch.isfinite(norm):
                self.nan_events += 1
                self.optimizer.zero_grad(set_to_none=True)
                continue
            self.optimizer.step()
            losses.append(float(loss.detach()))
        self.model.eval()
        self._refresh_weights()
        self.updates += 1
        if losses:
            self.last["risk/loss"] = float(np.mean(losses))
        return self.stats()

    def stats(self) -> dict[str, float]:
        """The ``risk/*`` metrics (see the class docstring)."""
        return {
            **self.last,
            "risk/train_samples": self.train_samples,
            "risk/nan_events": self.nan_events,
        }

    # -- checkpointing -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: weights, optimiser, generator, buffer, statistics."""
        return {
            "model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),  # Adam shares its tensors
            "generator": self.generator.get_state(),
            "buffer_x": self._x[: self._size].copy()
            if self._size < self.buffer_size
            else self._x.copy(),
            "buffer_y": self._y[: self._size].copy()
            if self._size < self.buffer_size
            else self._y.copy(),
            "pos": self._pos,
            "count": self._count,
            "mean": self._mean.copy(),
            "m2": self._m2.copy(),
            "train_samples": self.train_samples,
            "updates": self.updates,
            "nan_events": self.nan_events,
            "last": dict(self.last),
            "eval_pred": self._eval_pred.copy(),
            "eval_y": self._eval_y.copy(),
            "eval_pos": self._eval_pos,
            "eval_len": self._eval_len,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (same ``input_dim``, ``hidden`` and ``buffer_size``)."""
        bx = np.asarray(state["buffer_x"], dtype=np.float32)
        if bx.ndim != 2 or bx.shape[1] != self.input_dim or bx.shape[0] > self.buffer_size:
            raise ConfigError("buffer_x", bx.shape, "does not fit this head", source="RiskHead")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
        self.generator.set_state(state["generator"])
        self._size = bx.shape[0]
        self._x[: self._size] = bx
        self._y[: self._size] = np.asarray(state["buffer_y"], dtype=np.float32)
        self._pos = int(state["pos"])
        self._count = float(state["count"])
        self._mean = np.array(state["mean"], dtype=np.float64)
        self._m2 = np.array(state["m2"], dtype=np.float64)
        self.train_samples = int(state["train_samples"])
        self.updates = int(state["updates"])
        self.nan_events = int(state["nan_events"])
        self.last = dict(state["last"])
        self._eval_pred = np.array(state["eval_pred"], dtype=np.float32)
        self._eval_y = np.array(state["eval_y"], dtype=np.float32)
        self._eval_pos = int(state["eval_pos"])
        self._eval_len = int(state["eval_len"])
        self._fresh_x, self._fresh_y = [], []
        self.model.eval()
        self._refresh_norm()
        self._refresh_weights()


class RiskAnnotator:
    """The online loop shared by the risk wrappers: predict, hold pending steps, train.

    For ``num_envs`` parallel envs (1 for a single env): :meth:`predict` gives the risk of the
    current states' features (one batched forward), :meth:`record` appends the step that left
    those states (their features, the step's costs and end flags) to a
    :class:`~gymcurric.safety.risk_targets.PendingCostToGo`, and every ``train_every`` calls
    the rows whose horizon has passed (or whose episode ended) become samples of the
    :class:`RiskHead`, which then runs one :meth:`RiskHead.train`. The head is built on the
    first :meth:`predict`, when the feature size is known.

    Non-finite features (replaced by 0) and costs (replaced by 0) are counted in
    ``risk/nan_events``. The last ``history`` predictions are kept for
    :meth:`modulation`.

    Args:
        num_envs: parallel envs (an int, a numpy integer too).
        gamma: cost discount of the targets, in [0, 1] (a numpy number too).
        horizon: ``H`` of the targets.
        truncation: ``"complete"`` or ``"drop"`` (see :func:`cost_to_go_targets`).
        train_every: :meth:`record` calls between two training rounds.
        history: predictions kept for :meth:`modulation`.
        seed: the head's seed.
        **head_kwargs: passed to :class:`RiskHead` (``risk_lr``, ``risk_min_samples``, ...).
    """

    def __init__(
        self,
        num_envs: int = 1,
        *,
        gamma: float = 0.99,
        horizon: int = 50,
        truncation: str = "complete",
        train_every: int = 64,
        history: int = 10_000,
        seed: int = 0,
        **head_kwargs: Any,
    ) -> None:
        from gymcurric.safety.risk_targets import PendingCostToGo

        self.num_envs = _positive_int("num_envs", num_envs, source="RiskAnnotator")
        self.train_every = _positive_int("train_every", train_every)
        self.pending = PendingCostToGo(
            self.num_envs,
            gamma=_plain(gamma),  # np.float32 too, which PendingCostToGo's own check refuses
            horizon=horizon,
            truncation=truncation,  # type: ignore[arg-type]
        )
        self.seed = _seed(seed, "RiskAnnotator")
        self.head_kwargs = dict(head_kwargs)
        RiskHead(1, seed=self.seed, **self.head_kwargs)  # validate the head's arguments now
        self.head: RiskHead | None = None
        self._history = _zeros("history", (_positive_int("history", history),), "RiskAnnotator")
        self._hist_n = 0  # predictions made so far (the ring position is _hist_n % len)
        self._mod_mark = 0  # _hist_n at the previous modulation() call
        self.episodes = 0
        self.steps = 0
        self._early_nan = 0  # non-finite values seen before the head existed

    # -- prediction ----------------------------------------------------------------------------
    def sanitise(self, features: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """``[num_envs, d]`` float32 features with non-finite entries replaced by 0 (counted)."""
        x = np.asarray(features, dtype=np.float32).reshape(self.num_envs, -1)
        bad = ~np.isfinite(x)
        if bad.any():
            self._count_nan(int(bad.any(axis=1).sum()))
            x = np.where(bad, np.float32(0.0), x)
        return x

    def _count_nan(self, n: int) -> None:
        if self.head is None:
            self._early_nan += n
        else:
            self.head.nan_events += n

    def predict(self, features: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Risk of sanitised ``[num_envs, d]`` features (one forward); kept in the history."""
        if self.head is None:
            self.head = RiskHead(features.shape[1], seed=self.seed, **self.head_kwargs)
            self.head.nan_events += self._early_nan
        risk = self.head.predict(features)
        n = risk.shape[0]
        size = self._history.shape[0]
        idx = (self._hist_n + np.arange(n)) % size
        self._history[idx] = risk
        self._hist_n += n
        return risk

    # -- learning ------------------------------------------------------------------------------
    def record(
        self,
        features: npt.NDArray[np.float32],
        costs: npt.ArrayLike,
        terminated: npt.ArrayLike,
        truncated: npt.ArrayLike,
        valid: npt.ArrayLike | None = None,
    ) -> None:
        """Append one step (features of the states it started from); train on the cadence."""
        c = np.array(costs, dtype=np.float64).reshape(self.num_envs)
        bad = ~np.isfinite(c)
        if bad.any():
            self._count_nan(int(bad.sum()))
            c[bad] = 0.0
        self.pending.add(features, c, terminated, truncated, valid)
        self.steps += 1
        if self.steps % self.train_every == 0:
            self.train_now()

    def train_now(self) -> None:
        """Move the ready rows into the head's buffer and run one training round."""
        feats, targets = self.pending.pop_ready()
        if self.head is None:
            return
        if targets.size:
            self.head.add_samples(feats, targets)
        self.head.train()

    # -- reporting -----------------------------------------------------------------------------
    def stats(self) -> dict[str, float]:
        """The head's ``risk/*`` metrics (NaN, or 0 for the counts, before it exists)."""
        if self.head is None:
            nan = float("nan")
            return {
                "risk/loss": nan,
                "risk/corr": nan,
                "risk/pred_mean": nan,
                "risk/target_mean": nan,
                "risk/train_samples": 0,
                "risk/nan_events": self._early_nan,
            }
        return self.head.stats()

    def history(self) -> npt.NDArray[np.float32]:
        """The last ``history`` predictions, oldest first."""
        size = self._history.shape[0]
        if self._hist_n <= size:
            return self._history[: self._hist_n].copy()
        start = self._hist_n % size
        return np.concatenate([self._history[start:], self._history[:start]])

    def modulation(self, **kwargs: Any) -> Any:
        """:func:`~gymcurric.safety.modulation.lagrange_modulation` of the recent predictions.

        ``mean`` is over the predictions made since the previous call (at most ``history``),
        ``q_p`` over the whole history window; ``episodes_seen`` is the episodes finished so
        far. Keyword arguments (``alpha``, ``quantile_p``, ``slope``, ``eps``,
        ``min_episodes``) are passed on.
        """
        from gymcurric.safety.modulation import lagrange_modulation

        hist = self.history()
        recent_n = min(self._hist_n - self._mod_mark, hist.shape[0])
        self._mod_mark = self._hist_n
        recent = hist[hist.shape[0] - recent_n :]
        return lagrange_modulation(recent, hist, episodes_seen=self.episodes, **kwargs)

    def state_dict(self) -> dict[str, Any]:
        """Head state, history and counters (the pending window is not saved)."""
        return {
            "head": None if self.head is None else self.head.state_dict(),
            "history": self._history.copy(),
            "hist_n": self._hist_n,
            "mod_mark": self._mod_mark,
            "episodes": self.episodes,
            "steps": self.steps,
            "early_nan": self._early_nan,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`; pending steps are forgotten."""
        head_state = state["head"]
        if head_state is not None:
            dim = int(np.asarray(head_state["mean"]).shape[0])
            self.head = RiskHead(dim, seed=self.seed, **self.head_kwargs)
            self.head.load_state_dict(head_state)
        else:
            self.head = None
        self._history = np.array(state["history"], dtype=np.float32)
        self._hist_n = int(state["hist_n"])
        self._mod_mark = int(state["mod_mark"])
        self.episodes = int(state["episodes"])
        self.steps = int(state["steps"])
        self._early_nan = int(state["early_nan"])
        self.pending.clear()
