"""The staged datapack curriculum: which stage is active, and which datapacks are eligible.

:class:`DataPackCurriculum` holds rolling per-episode diagnostics in fixed-size numpy rings
(O(1) per episode), advances stages by rule or fallback episode count, and tracks prerequisite
tags. It has no randomness: the same config and the same sequence of
:meth:`~DataPackCurriculum.update_diagnostics` / :meth:`~DataPackCurriculum.set_stage` calls
always give the same schedule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.datapacks.schedule import (
    CurriculumSchedule,
    DataPackCurriculumConfig,
    load_curriculum_config,
)
from gymcurric.datapacks.schema import DataPack
from gymcurric.datapacks.table import DatapackTable, datapack_records
from gymcurric.errors import ConfigError

__all__ = ["DataPackCurriculum"]

#: the per-episode rings of a state_dict's "arrays"
_RINGS = ("error", "success", "mpl", "return", "aff_ok", "aff_n")


class DataPackCurriculum:
    """Staged curriculum over datapacks (warmup → skill_building → frontier → fine_tuning).

    Args:
        config: stages and thresholds: a :class:`DataPackCurriculumConfig`, a mapping in either
            config format (gymcurric's, or the specification's with ``stages`` by name), or the
            path of a YAML / JSON file; default :class:`DataPackCurriculumConfig`.
        datapacks: the datapacks it schedules (the specification's second argument), kept as
            :attr:`datapacks`; the schedule does not depend on them. ``DataPack`` records (or
            a :class:`DatapackTable`): a path or a raw dict record is a ``ConfigError``.

    Examples:
        >>> cur = DataPackCurriculum()
        >>> cur.schedule().stage, cur.schedule().strategy
        ('warmup', 'balanced')
        >>> for _ in range(100):
        ...     _ = cur.update_diagnostics(success=True, error=False)
        >>> cur.stage  # error rate 0 <= 0.3 over a full window of 100 warmup episodes
        'skill_building'
    """

    def __init__(
        self,
        config: DataPackCurriculumConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        datapacks: Sequence[DataPack] | DatapackTable | None = None,
    ) -> None:
        if config is None:
            config = DataPackCurriculumConfig()
        elif isinstance(config, Mapping):
            config = DataPackCurriculumConfig.from_dict(config, source="DataPackCurriculum")
        elif isinstance(config, str | os.PathLike):
            config = load_curriculum_config(config)
        if not isinstance(config, DataPackCurriculumConfig):
            raise ConfigError(
                "config",
                config,
                "expected a DataPackCurriculumConfig, a mapping or a file path",
                source="DataPackCurriculum",
            )
        self.config = config
        if isinstance(datapacks, DatapackTable):
            datapacks = datapacks.records
        self.datapacks: tuple[DataPack, ...] = (
            ()
            if datapacks is None
            else datapack_records(datapacks, "datapacks", "DataPackCurriculum")
        )
        w = self.config.ring_size
        self._error = np.zeros(w)
        self._success = np.zeros(w)
        self._mpl = np.full(w, np.nan)
        self._return = np.full(w, np.nan)
        self._aff_ok = np.zeros(w)
        self._aff_n = np.zeros(w)
        self.episode = 0
        self.stage_index = 0
        self.stage_start = 0
        self._tag_ok: dict[str, int] = {}
        self._tag_n: dict[str, int] = {}
        self._satisfied: set[str] = set()
        self.transitions: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ stage

    @property
    def stage(self) -> str:
        """Name of the active stage."""
        return self.config.stages[self.stage_index].name

    @property
    def satisfied_tags(self) -> frozenset[str]:
        """Prerequisite tags satisfied so far (never unsatisfied again)."""
        return frozenset(self._satisfied)

    def set_stage(self, stage: str, episode: int | None = None) -> None:
        """Enter ``stage`` now (manual override); optionally reset the episode count.

        Raises:
            ConfigError: unknown stage (naming the known ones) or a negative episode.
        """
        index = self.config.stage_index(stage)
        if episode is not None:
            check_int(
                "episode",
                episode,
                minimum=0,
                source="DataPackCurriculum.set_stage",
                reason="expected an integer >= 0",
            )
            self.episode = episode
        self._enter(index, "manual")

    def _enter(self, index: int, reason: str) -> None:
        self.transitions.append(
            {
                "episode": self.episode,
                "from": self.stage,
                "to": self.config.stages[index].name,
                "reason": reason,
            }
        )
        self.stage_index = index
        self.stage_start = self.episode

    def schedule(self) -> CurriculumSchedule:
        """What the active stage prescribes at the current episode."""
        return self._schedule_of(self.stage_index, self.episode)

    def _schedule_of(self, index: int, episode: int) -> CurriculumSchedule:
        s = self.config.stages[index]
        return CurriculumSchedule(
            s.name,
            episode,
            s.strategy,
            dict(s.strategy_params),
            dict(s.weight_multipliers),
            s.filters,
        )

    def get_schedule(self, episode: int) -> CurriculumSchedule:
        """The schedule in force at episode ``episode`` (the specification's interface).

        A pure query (the curriculum does not change): for an episode already played, the
        stage that was active then (from :attr:`transitions`); for the current one, the active
        stage (= :meth:`schedule`); for a later one, the stage the fallbacks
        (``fallback_episodes`` / ``fallback_episode``) will have reached by then with
        ``auto_advance``, since the rules cannot be foreseen. The projection applies the live
        rule exactly: the curriculum advances at most one stage per finished episode, so a
        stage is played for at least one episode even when its ``fallback_episode`` is not
        after the previous stage's. The same config, datapacks and history give the same
        schedule.

        Raises:
            ConfigError: ``episode`` is not an integer >= 0.

        Examples:
            >>> cur = DataPackCurriculum()  # fallbacks after 500, 2000 and 5000 stage episodes
            >>> [cur.get_schedule(e).stage for e in (0, 499, 500, 2500, 7500)]
            ['warmup', 'warmup', 'skill_building', 'frontier', 'fine_tuning']
            >>> cur.get_schedule(5000) == DataPackCurriculum().get_schedule(5000)
            True
        """
        check_int(
            "episode",
            episode,
            minimum=0,
            allow_numpy=True,
            source="DataPackCurriculum.get_schedule",
            reason="expected an integer >= 0",
        )
        episode = int(episode)
        if episode < self.episode:
            index = self._stage_at(episode)
        else:
            index, start = self.stage_index, self.stage_start
            last = len(self.config.stages) - 1
            while self.config.auto_advance and index < last:
                end = self._fallback_end(index, start)
                if end is None or end > episode:
                    break
                index, start = index + 1, end
        return self._schedule_of(index, episode)

    def _stage_at(self, episode: int) -> int:
        """The stage active at a past ``episode``, from the transitions."""
        index = 0
        for t in self.transitions:
            if t["episode"] > episode:
                break
            index = self.config.stage_index(t["to"])
        return index

    def _fallback_end(self, index: int, start: int) -> int | None:
        """The episode at which stage ``index``, entered at ``start``, is left by a fallback.

        Never before ``start + 1``: the stage is checked after each finished episode, so it is
        played for at least one episode (and the curriculum advances at most one stage per
        episode), even when its ``fallback_episode`` is not after the previous stage's.
        """
        spec = self.config.stages[index]
        ends = []
        if spec.fallback_episodes is not None:
            ends.append(start + spec.fallback_episodes)
        if spec.fallback_episode is not None:
            ends.append(spec.fallback_episode)
        return max(min(ends), start + 1) if ends else None

    def eligible_weights(self, table: DatapackTable) -> np.ndarray:
        """Per-row weights for the active stage: filters, multipliers and prerequisites.

        A datapack is eligible only when all its ``prerequisite_tags`` are satisfied; its
        weight is then the product of the stage's multipliers for its tag families (0 if a
        filter excludes it).
        """
        w = self.config.stages[self.stage_index].weights(table)
        matrix, tags = table.prerequisites()
        if tags:
            missing = np.array([t not in self._satisfied for t in tags], np.bool_)
            w = np.where(matrix[:, missing].any(axis=1), 0.0, w)
        return w

    # ------------------------------------------------------------------ diagnostics

    def update_diagnostics(
        self,
        *,
        success: bool,
        error: bool = False,
        mpl: float | None = None,
        tag_results: Mapping[str, bool] | None = None,
        return_: float | None = None,
    ) -> str | None:
        """Record one finished episode; returns the new stage's name if it advanced.

        Args:
            success: the episode succeeded.
            error: the episode had an error (e.g. a safety violation / positive cost).
            mpl: marginal productivity measured this episode, if any.
            tag_results: outcome per affordance / prerequisite tag attempted this episode.
            return_: the episode's (undiscounted) return, if known; averaged into the
                ``mean_return`` metric.
        """
        slot = self.episode % self.config.ring_size
        self._success[slot] = float(bool(success))
        self._error[slot] = float(bool(error))
        self._mpl[slot] = np.nan if mpl is None else float(mpl)
        self._return[slot] = np.nan if return_ is None else float(return_)
        results = dict(tag_results or {})
        self._aff_n[slot] = len(results)
        self._aff_ok[slot] = sum(bool(v) for v in results.values())
        for tag, ok in sorted(results.items()):
            self._tag_n[tag] = self._tag_n.get(tag, 0) + 1
            self._tag_ok[tag] = self._tag_ok.get(tag, 0) + int(bool(ok))
            n = self._tag_n[tag]
            if (
                n >= self.config.prerequisite_min_attempts
                and self._tag_ok[tag] / n > self.config.prerequisite_threshold
            ):
                self._satisfied.add(tag)
        self.episode += 1
        if self.config.auto_advance:
            reason = self._advance_reason()
            if reason is not None:
                self._enter(self.stage_index + 1, reason)
                return self.stage
        return None

    def _window(self, values: np.ndarray, window: int | None = None) -> np.ndarray:
        """This stage's last ``min(window, episodes in stage)`` values, oldest first."""
        ring = self.config.ring_size
        k = min(window or self.config.window, self.episode - self.stage_start)
        return values[(self.episode - k + np.arange(k)) % ring]

    def metrics(self, window: int | None = None) -> dict[str, float | None]:
        """Rolling metrics over this stage's recent episodes (``None`` when not measurable).

        Args:
            window: how many of the stage's last episodes (default: the config's ``window``;
                at most the largest window of the config's rules).
        """
        err = self._window(self._error, window)
        n_aff = self._window(self._aff_n, window).sum()
        mpl = self._window(self._mpl, window)
        mpl = mpl[~np.isnan(mpl)]
        improvement = None
        if mpl.size >= 2:
            old, new = mpl[: mpl.size // 2].mean(), mpl[mpl.size // 2 :].mean()
            improvement = float((new - old) / max(abs(old), 1e-8))
        ret = self._window(self._return, window)
        ret = ret[~np.isnan(ret)]
        success = self._window(self._success, window)
        return {
            "error_rate": float(err.mean()) if err.size else None,
            "success_rate": float(success.mean()) if err.size else None,
            "affordance_success_rate": (
                float(self._window(self._aff_ok, window).sum() / n_aff) if n_aff else None
            ),
            "mpl_improvement_rate": improvement,
            "mean_return": float(ret.mean()) if ret.size else None,
        }

    def _rule_value(self, rule: Any) -> float | None:
        return self.metrics(rule.window)[rule.metric]

    def _advance_reason(self) -> str | None:
        if self.stage_index >= len(self.config.stages) - 1:
            return None
        spec = self.config.stages[self.stage_index]
        in_stage = self.episode - self.stage_start
        if spec.rules and all(
            in_stage >= (r.window or self.config.window) and r.holds(self._rule_value(r))
            for r in spec.rules
        ):
            return "rules"
        end = self._fallback_end(self.stage_index, self.stage_start)
        if end is not None and self.episode >= end:
            return "fallback"
        return None

    def get_diagnostics(self) -> dict[str, Any]:
        """JSON-safe summary: stage, progress, rule status, prerequisites, next-stage estimate.

        ``stage_progress`` is the share of the stage's fallback episodes done (``None`` without
        a fallback); ``episodes_to_next_stage`` is an upper bound from the fallback (the rules
        may advance earlier), ``None`` in the last stage or without a fallback.
        """
        spec = self.config.stages[self.stage_index]
        in_stage = self.episode - self.stage_start
        last = self.stage_index == len(self.config.stages) - 1
        end = self._fallback_end(self.stage_index, self.stage_start)
        length = None if end is None else end - self.stage_start
        m = self.metrics()
        return {
            "stage": self.stage,
            "stage_index": self.stage_index,
            "episode": self.episode,
            "episodes_in_stage": in_stage,
            "stage_progress": (None if length is None else min(in_stage / length, 1.0)),
            "next_stage": None if last else self.config.stages[self.stage_index + 1].name,
            "episodes_to_next_stage": (None if last or end is None else max(end - self.episode, 0)),
            "rules": [
                {
                    "metric": r.metric,
                    "op": r.op,
                    "threshold": r.threshold,
                    **({} if r.window is None else {"window": r.window}),
                    "value": self._rule_value(r),
                    "holds": r.holds(self._rule_value(r)),
                }
                for r in spec.rules
            ],
            "metrics": m,
            "satisfied_prerequisites": sorted(self._satisfied),
            "tag_success_rates": {t: self._tag_ok[t] / self._tag_n[t] for t in sorted(self._tag_n)},
        }

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (arrays copied)."""
        return {
            "config": self.config.to_dict(),
            "arrays": {k: getattr(self, f"_{k}").copy() for k in _RINGS},
            "episode": self.episode,
            "stage_index": self.stage_index,
            "stage_start": self.stage_start,
            "tag_ok": dict(self._tag_ok),
            "tag_n": dict(self._tag_n),
            "satisfied": sorted(self._satisfied),
            "transitions": [dict(t) for t in self.transitions],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` taken from a curriculum with the same config.

        Raises:
            ConfigError: the state was taken under a different config, or does not fit (a key
                missing, a ring of the wrong length, a stage index out of range, ...): naming
                the key; the curriculum is then left as it was.
        """
        src = "DataPackCurriculum.load_state_dict"
        if not isinstance(state, Mapping):
            raise ConfigError("state", state, "expected a mapping (a state_dict)", source=src)
        if state.get("config") != self.config.to_dict():
            raise ConfigError(
                "state['config']",
                "<differs>",
                "state_dict was taken under a different DataPackCurriculumConfig",
            )
        key = "arrays"
        try:  # everything checked before anything changes
            arrays = {}
            for k, v in dict(state[key]).items():
                if k not in _RINGS:
                    raise ValueError(f"unknown ring {k!r}; expected among {list(_RINGS)}")
                arr = np.asarray(v, np.float64)
                shape = getattr(self, f"_{k}").shape
                if arr.shape != shape:
                    raise ValueError(f"ring {k!r} of shape {arr.shape}, expected {shape}")
                arrays[k] = arr
            counts = {}
            for key in ("episode", "stage_index", "stage_start"):
                check_int(key, state[key], minimum=0, allow_numpy=True, source=src)
                counts[key] = int(state[key])
            key = "stage_index"
            if counts[key] >= len(self.config.stages):
                raise ValueError(f"the config has {len(self.config.stages)} stages")
            key = "tag_ok"
            tag_ok = {str(t): int(n) for t, n in dict(state[key]).items()}
            key = "tag_n"
            tag_n = {str(t): int(n) for t, n in dict(state[key]).items()}
            key = "satisfied"
            satisfied = {str(t) for t in state[key]}
            key = "transitions"
            transitions = [dict(t) for t in state[key]]
        except ConfigError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                key,
                state.get(key),
                f"does not fit a DataPackCurriculum state ({exc!r})",
                source=src,
            ) from exc
        for k, arr in arrays.items():
            getattr(self, f"_{k}")[:] = arr
        self.episode, self.stage_index = counts["episode"], counts["stage_index"]
        self.stage_start = counts["stage_start"]
        self._tag_ok, self._tag_n = tag_ok, tag_n
        self._satisfied = satisfied
        self.transitions = transitions
