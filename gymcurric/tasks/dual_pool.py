"""The dual explore/exploit pool with promotion and an adaptive explore probability."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError
from gymcurric.tasks.pools import Pool, PoolOps, is_fraction, lower_quantile, pick_slot, write_cdf
from gymcurric.tasks.scorers import Scorer
from gymcurric.tasks.spaces import TaskSpace
from gymcurric.tasks.state import EMPTY, EXPLOIT, EXPLORE, CurriculumState, K, S

__all__ = ["DualPool"]


@dataclass(frozen=True)
class DualPool(Pool):
    """Explore and exploit pools with promotion and an adaptive explore probability ``rho``.

    * New tasks enter the explore pool (``explore_size`` tasks, kept full from the space).
    * **Promotion.** On each recompute, every explore task with ``>= min_samples`` episodes
      since it entered (or since its last attempt) makes one attempt. *Bootstrap phase*
      (exploit not full): the best candidates fill the free exploit slots. *Steady phase*: a
      candidate is promoted when its value beats the ``promotion_quantile`` quantile ``q`` of the
      exploit values (ties: a fair coin) and is at least the weakest exploit task's value, which it
      displaces. Losers and displaced tasks leave (replaced by fresh tasks), or, in a finite space
      with nothing left to draw, go back to explore for another try.
    * **Adaptive rho.** Steady-phase attempts fill a window of the last ``window`` outcomes; after
      ``m`` attempts ``rho <- a^m rho + (1 - a^m) r`` (``m`` applications of
      ``rho <- a rho + (1 - a) r`` with ``a = rho_alpha``, ``r`` the window's success fraction),
      clipped to ``[rho_min, rho_max]``. Bootstrap samples explore only.

    Why ``q = 0.5`` by default rather than "beats the weakest" (``q = 0``): with values carrying
    no signal, a fresh task beats the minimum of ``X`` exploit values with probability
    ``X / (X + 1)``, so ``r`` -> 1 and ``rho`` pins at ``rho_max``. Against the median, ``r``
    -> 1/2 without signal and rises only when explore really finds better tasks. Exploit tasks
    leave only by displacement, so the exploit pool fills and the phase leaves bootstrap.

    Attributes:
        explore_size: tasks in the explore pool (>= 1).
        exploit_size: tasks in the exploit pool (>= 1).
        min_samples: episodes before an explore task attempts promotion (S_min; ~2/alpha so
            that learning progress is measurable, see :mod:`gymcurric.tasks.signals`).
        promotion_quantile: ``q`` in ``[0, 1)``.
        rho_init, rho_alpha, rho_min, rho_max: initial value, EMA factor and bounds of ``rho``.
        window: promotion outcomes remembered (>= 1).
    """

    explore_size: int = 50
    exploit_size: int = 200
    min_samples: int = 20
    promotion_quantile: float = 0.5
    rho_init: float = 0.5
    rho_alpha: float = 0.9
    rho_min: float = 0.05
    rho_max: float = 0.95
    window: int = 200

    def __post_init__(self) -> None:
        c = "DualPool"
        for name in ("explore_size", "exploit_size", "min_samples", "window"):
            check_int(name, getattr(self, name), source=c)
        if not is_fraction(self.promotion_quantile) or self.promotion_quantile >= 1:
            raise ConfigError(
                "promotion_quantile",
                self.promotion_quantile,
                "expected a float in [0, 1)",
                source=c,
            )
        for name in ("rho_alpha", "rho_min", "rho_max", "rho_init"):
            if not is_fraction(getattr(self, name)):
                raise ConfigError(name, getattr(self, name), "expected a float in [0, 1]", source=c)
        if not self.rho_min <= self.rho_max:
            raise ConfigError(
                "rho_max", self.rho_max, f"must be >= rho_min={self.rho_min}", source=c
            )
        if not self.rho_min <= self.rho_init <= self.rho_max:
            raise ConfigError("rho_init", self.rho_init, "must lie in [rho_min, rho_max]", source=c)

    @property
    def window_length(self) -> int:
        """The promotion window."""
        return self.window

    def capacity_for(self, space: TaskSpace) -> int:
        """``explore_size + exploit_size`` (at most the size of a finite space)."""
        n = self.explore_size + self.exploit_size
        if space.size is not None and n > space.size:
            raise ConfigError(
                "explore_size + exploit_size",
                n,
                f"exceeds the {space.size} tasks of the space",
                source="DualPool",
            )
        return n

    def initial_slots(self, capacity: int) -> int:
        """Only the explore pool is filled at first."""
        return self.explore_size

    def init(self, st: CurriculumState) -> None:
        """``rho = rho_init``, bootstrap phase."""
        st.scalars[S.RHO] = self.rho_init
        st.counters[K.PHASE] = 0

    def maintain(self, st: CurriculumState, raw: np.ndarray, ops: PoolOps) -> bool:
        """Promotion attempts, bootstrap filling, the window and ``rho``."""
        pool, c = st.pool, st.counters
        cand = np.flatnonzero((pool == EXPLORE) & (st.age >= self.min_samples))
        changed = False
        if cand.size:
            cand = cand[np.argsort(-raw[cand], kind="stable")]
            free = self.exploit_size - int(np.count_nonzero(pool == EXPLOIT))
            if free > 0:
                boot, cand = cand[:free], cand[free:]
                for slot in boot.tolist():
                    pool[slot] = EXPLOIT
                    st.age[slot] = 0
                    ops.fill_empty(EXPLORE)
                c[K.BOOTSTRAP_PROMOTIONS] += boot.size
                changed = True
            if cand.size and np.count_nonzero(pool == EXPLOIT) == self.exploit_size:
                self._attempt(st, raw, cand, ops)
                changed = True
        c[K.PHASE] = int(np.count_nonzero(pool == EXPLOIT) == self.exploit_size)
        return changed

    def _attempt(
        self, st: CurriculumState, raw: np.ndarray, cand: np.ndarray, ops: PoolOps
    ) -> None:
        pool, c = st.pool, st.counters
        ex = np.flatnonzero(pool == EXPLOIT)
        thr = lower_quantile(raw[ex], self.promotion_quantile)
        val = raw[cand]
        win = val > thr
        tie = val == thr
        if tie.any():
            win |= tie & (ops.rng.random(cand.size) < 0.5)
        winners = cand[win]  # best first
        losers = ex[np.argsort(raw[ex], kind="stable")][: winners.size]  # weakest first
        ok = raw[winners[: losers.size]] >= raw[losers]
        promoted, displaced = winners[: losers.size][ok], losers[ok]
        outcome = np.isin(cand, promoted)
        pool[promoted] = EXPLOIT
        st.age[promoted] = 0
        for slot in displaced.tolist():
            if ops.replace(slot, EXPLORE):
                c[K.EVICTIONS] += 1
        for slot in cand[~outcome].tolist():
            if ops.replace(slot, EXPLORE):
                c[K.EVICTIONS] += 1
        w = st.window
        for o in outcome.tolist():
            pos = int(c[K.WIN_POS])
            if c[K.WIN_FILL] == w.size:
                c[K.WIN_SUM] -= w[pos]
            else:
                c[K.WIN_FILL] += 1
            w[pos] = o
            c[K.WIN_SUM] += o
            c[K.WIN_POS] = (pos + 1) % w.size
        m = int(outcome.size)
        c[K.ATTEMPTS] += m
        c[K.PROMOTIONS] += int(outcome.sum())
        rate = float(c[K.WIN_SUM]) / float(c[K.WIN_FILL])
        a = self.rho_alpha**m
        rho = a * float(st.scalars[S.RHO]) + (1.0 - a) * rate
        st.scalars[S.RHO] = min(max(rho, self.rho_min), self.rho_max)
        st.scalars[S.PROMO_RATE] = rate

    def _rho(self, st: CurriculumState) -> float:
        """Probability of drawing from explore now.

        1 in bootstrap or with an empty exploit; 0 when explore has nothing to draw while
        exploit has (every remaining task is in exploit, e.g. after ``mark_invalid`` on a
        small finite space).
        """
        c = st.counters
        if c.item(K.LAST_A) < 0 and c.item(K.LAST_B) >= 0:
            return 0.0
        if c.item(K.PHASE) == 0 or c.item(K.LAST_B) < 0:
            return 1.0
        return float(st.scalars.item(S.RHO))

    def explore_probability(self, st: CurriculumState) -> float:
        """``rho`` now (1 in bootstrap or with an empty exploit pool, 0 with an empty explore)."""
        return self._rho(st)

    def state_problems(self, st: CurriculumState) -> list[str]:
        """At most ``exploit_size`` exploit tasks; ``rho`` within ``[rho_min, rho_max]``."""
        out = []
        exploit = int(np.count_nonzero(st.pool == EXPLOIT))
        if exploit > self.exploit_size:
            out.append(f"{exploit} exploit tasks (DualPool exploit_size={self.exploit_size})")
        rho = float(st.scalars[S.RHO])
        if not self.rho_min <= rho <= self.rho_max:
            out.append(
                f"scalars[RHO] = {rho!r} (expected a value in [rho_min, rho_max] = "
                f"[{self.rho_min}, {self.rho_max}])"
            )
        return out

    def distribute(self, st: CurriculumState, scorer: Scorer, raw: np.ndarray) -> None:
        """Per-pool probabilities; ``prob`` is their ``rho``-weighted mixture."""
        pa = scorer.weights(st, raw, st.pool == EXPLORE)
        pb = scorer.weights(st, raw, st.pool == EXPLOIT)
        write_cdf(pa, st.cdf_a, st, K.LAST_A, S.TOTAL_A)
        write_cdf(pb, st.cdf_b, st, K.LAST_B, S.TOTAL_B)
        rho = self._rho(st)
        np.multiply(pa, rho, out=st.prob)
        st.prob += (1.0 - rho) * pb

    def sample_one(self, st: CurriculumState, rng: np.random.Generator) -> int:
        """Explore with probability ``rho`` (always in bootstrap), else exploit."""
        rho = self._rho(st)
        if rho < 1.0 and rng.random() >= rho:
            return pick_slot(
                st.cdf_b, st.scalars.item(S.TOTAL_B), st.counters.item(K.LAST_B), rng.random()
            )
        return pick_slot(
            st.cdf_a, st.scalars.item(S.TOTAL_A), st.counters.item(K.LAST_A), rng.random()
        )

    def sample(self, st: CurriculumState, rng: np.random.Generator, k: int) -> np.ndarray:
        """Draw ``k`` slots, each from explore with probability ``rho``."""
        a = Pool.sample(self, st, rng, k)
        rho = self._rho(st)
        if rho >= 1.0:
            return a
        coin = rng.random(k) >= rho
        u = rng.random(k) * st.scalars[S.TOTAL_B]
        b = np.minimum(st.cdf_b.searchsorted(u, "right"), st.counters[K.LAST_B])
        out: np.ndarray = np.where(coin, b, a)
        return out

    def stats(self, st: CurriculumState) -> dict[str, float]:
        """rho, promotion rate, phase, pool sizes and per-pool mean value."""
        ex, xp = st.pool == EXPLORE, st.pool == EXPLOIT
        c = st.counters
        fill = int(c[K.WIN_FILL])
        return {
            "curriculum/rho": float(st.scalars[S.RHO]),
            "curriculum/explore_ratio": self._rho(st),
            "curriculum/promotion_rate": float(c[K.WIN_SUM]) / fill if fill else 0.0,
            "curriculum/phase": float(c[K.PHASE]),
            "curriculum/explore_size": float(np.count_nonzero(ex)),
            "curriculum/exploit_size": float(np.count_nonzero(xp)),
            "curriculum/explore_mean_lp": float(st.raw[ex].mean()) if ex.any() else 0.0,
            "curriculum/exploit_mean_lp": float(st.raw[xp].mean()) if xp.any() else 0.0,
            "curriculum/promotions": float(c[K.PROMOTIONS]),
            "curriculum/promotion_attempts": float(c[K.ATTEMPTS]),
            "curriculum/bootstrap_promotions": float(c[K.BOOTSTRAP_PROMOTIONS]),
            "curriculum/empty_slots": float(np.count_nonzero(st.pool == EMPTY)),
        }
