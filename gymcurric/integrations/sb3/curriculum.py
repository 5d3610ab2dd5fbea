"""Curriculum for Stable-Baselines3: log ``curriculum/*`` stats, checkpoint and resume the state.

Nothing SB3-specific is needed to *run* a curriculum: wrap each sub-env in
:class:`gymcurric.wrappers.SampleCurriculumTask` (``make_vec_env(...,
wrapper_class=SampleCurriculumTask, wrapper_kwargs={"curriculum": cur})``); it works unchanged
in ``DummyVecEnv`` and, with a curriculum on the shared-memory backend, in ``SubprocVecEnv``
with any start method.
:class:`CurriculumCallback` adds logging and checkpoints.

Resuming exactly::

    model = PPO.load("ckpt/rl_model_4096_steps.zip", env=venv)
    load_curriculum_state("ckpt/rl_model_curriculum_4096_steps.npz", cur, env=venv)
    model.learn(more_steps, reset_num_timesteps=False, callback=CurriculumCallback(cur, ...))

``load_curriculum_state(..., env=venv)`` restores the curriculum *and* makes each sub-env's
first reset in ``learn`` continue the task it ran at the checkpoint without reseeding the
curriculum (``PPO.load`` re-seeds the envs), so the task sequence continues where the
checkpoint was taken. It is exact for a single process (``DummyVecEnv``) when episodes end at
the checkpoint step; an episode in progress is restarted on the same task. With
``SubprocVecEnv`` every save first flushes the episodes the workers buffered, so the file
holds every episode that ended before it; the resumed task sequence is not exact there (the
workers' generators are not saved, and their updates' order depends on scheduling).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError
from gymcurric.wrappers.curriculum_state import load_curriculum_state, save_curriculum_state

__all__ = ["CurriculumCallback", "load_curriculum_state", "save_curriculum_state"]


class CurriculumCallback(BaseCallback):
    """Log the curriculum's ``curriculum/*`` statistics and save its state next to checkpoints.

    At the end of every rollout, each entry of ``curriculum.stats()`` is recorded in SB3's
    logger (dumped with the other ``rollout/`` and ``train/`` values). With ``save_path``,
    every ``save_freq`` calls (vector steps, as in SB3's ``CheckpointCallback``) the state and
    the task each sub-env is running are written to
    ``{save_path}/{name_prefix}_curriculum_{num_timesteps}_steps.npz``, the name
    ``CheckpointCallback`` gives the model (``{name_prefix}_{num_timesteps}_steps.zip``) with
    ``curriculum_`` inserted: use both with the same ``save_freq``, ``save_path`` and
    ``name_prefix``, and resume with :func:`load_curriculum_state`.

    Args:
        curriculum: the curriculum the envs use (in this process; for ``SubprocVecEnv`` on the
            shared-memory backend).
        save_path: folder for the state files, or ``None`` (no saving).
        save_freq: save every this many calls (> 0 with ``save_path``).
        name_prefix: file name prefix, as ``CheckpointCallback``'s.
        verbose: 1 prints each saved path.

    Examples:
        >>> from stable_baselines3 import PPO
        >>> from stable_baselines3.common.env_util import make_vec_env
        >>> from gymcurric.tasks import Curriculum, FixedTaskSpace
        >>> from gymcurric.wrappers import SampleCurriculumTask
        >>> cur = Curriculum(FixedTaskSpace([{"num_hazards": n} for n in (0, 4)]), seed=0)
        >>> venv = make_vec_env("gymcurric/HazardGrid-v0", n_envs=2, seed=0,
        ...                     wrapper_class=SampleCurriculumTask,
        ...                     wrapper_kwargs={"curriculum": cur})
        >>> model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0)
        >>> _ = model.learn(256, callback=CurriculumCallback(cur))  # logs curriculum/...
        >>> cur.stats()["curriculum/updates"] > 0
        True
    """

    def __init__(
        self,
        curriculum: Any,
        save_path: str | os.PathLike[str] | None = None,
        save_freq: int = 0,
        name_prefix: str = "rl_model",
        verbose: int = 0,
    ) -> None:
        """Create the callback; see the class docstring for the arguments."""
        if not callable(getattr(curriculum, "stats", None)):
            raise ConfigError(
                "curriculum",
                curriculum,
                "expected a gymcurric Curriculum",
                source="CurriculumCallback",
            )
        check_int("save_freq", save_freq, minimum=0, source="CurriculumCallback")
        if save_path is not None and save_freq == 0:
            raise ConfigError(
                "save_freq",
                save_freq,
                "must be > 0 when save_path is given",
                source="CurriculumCallback",
            )
        super().__init__(verbose)
        self.curriculum = curriculum
        self.save_path = None if save_path is None else Path(save_path)
        self.save_freq = save_freq
        self.name_prefix = name_prefix
        #: Paths written so far, oldest first.
        self.saved: list[Path] = []

    def checkpoint_path(self, num_timesteps: int | None = None) -> Path:
        """The state file of ``num_timesteps`` (default: now)."""
        if self.save_path is None:
            raise ConfigError(
                "save_path", None, "no save_path was given", source="CurriculumCallback"
            )
        steps = self.num_timesteps if num_timesteps is None else num_timesteps
        return self.save_path / f"{self.name_prefix}_curriculum_{steps}_steps.npz"

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Save the state and the sub-envs' current tasks now (to :meth:`checkpoint_path`).

        The sub-envs are flushed first (:func:`save_curriculum_state`): the episodes the
        workers of a ``SubprocVecEnv`` buffered are in the file.
        """
        out = save_curriculum_state(
            path if path is not None else self.checkpoint_path(),
            self.curriculum,
            env=self.training_env,
        )
        self.saved.append(out)
        if self.verbose >= 1:
            print(f"Saving curriculum state to {out}")
        return out

    def _on_step(self) -> bool:
        if self.save_path is not None and self.n_calls % self.save_freq == 0:
            self.save()
        return True

    def _on_rollout_end(self) -> None:
        for key, value in self.curriculum.stats().items():
            self.logger.record(key, value)
