"""The vector resume harness: a curriculum-wrapped vector env run, saved and resumed.

Shared by ``test_curriculum_resume.py`` (which describes the runs), its ``_outer``, ``_stale``
and ``_used`` variants and ``tests/wrappers/test_curriculum_resave.py``: :func:`build` makes
the curriculum and the vector env of a ``(mode, space, vec)`` case, :func:`uninterrupted` runs
one to its checkpoint and on, :func:`resumed` loads a checkpoint into a fresh one (or one that
ran first) and goes on. Importable in a new interpreter (``tests.new_interpreter``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from gymcurric.tasks import Curriculum, FixedTaskSpace, OpenEndedPool
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from gymcurric.wrappers.vector import make_curriculum_vec
from tests.wrappers.vector.vector_runs import STUB

N = 4
STEPS = 20
PLAIN = FixedTaskSpace([{"level": i + 1, "len": 3} for i in range(12)])
SPACES = {  # the task space and the curriculum's other settings
    "plain": (PLAIN, {}),
    # every fourth task is refused (make_curriculum_vec's spares take the retries)
    "refusing": (
        FixedTaskSpace(
            [
                {"reject": True, "n": i} if i % 4 == 1 else {"level": i + 1, "len": 3}
                for i in range(12)
            ]
        ),
        {},
    ),
    # half the tasks in the pool; the episodes' records evict tasks, waiting ones too
    "evicting": (
        PLAIN,
        {"pool": OpenEndedPool(capacity=6, min_samples=1, evictions_per_recompute=2)},
    ),
}
MODES = {
    m.name: m for m in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)
}


def build(mode: str, space: str, vec: str, seed: int) -> tuple[Any, Any]:
    backend = "shared" if vec == "async" else "local"
    task_space, settings = SPACES[space]
    cur = Curriculum(task_space, seed=seed, recompute_every=3, backend=backend, **settings)
    kwargs: dict[str, Any] = {"autoreset_mode": MODES[mode]}
    if vec == "async":
        kwargs["context"] = "fork"
    envs = make_curriculum_vec(STUB, cur, N, vectorization_mode=vec, vector_kwargs=kwargs)
    return cur, envs


def step(envs: Any) -> tuple[list[int], list[float], list[bool]]:
    _, rewards, term, trunc, _ = envs.step(np.zeros(N, dtype=np.int64))
    return envs.task_ids.tolist(), rewards.tolist(), (term | trunc).tolist()


def stream(envs: Any, mode: str, n: int) -> list[Any]:
    """``n`` steps: per step the task ids, rewards and dones (and the masked resets)."""
    out: list[Any] = []
    for _ in range(n):
        ids, rewards, dones = step(envs)
        out.append([ids, rewards, dones])
        if MODES[mode] == AutoresetMode.DISABLED and any(dones):
            envs.reset(options={"reset_mask": np.asarray(dones)})
            out.append(["reset", envs.task_ids.tolist()])
    return out


def final_state(cur: Any, envs: Any) -> dict[str, Any]:
    """The curriculum state after the run's last step, arrays as lists (NaN as a string)."""
    envs.flush_curriculum()
    state = dict(cur.state_dict())
    arrays = state.pop("arrays")
    state["arrays"] = {k: np.asarray(a).tolist() for k, a in sorted(arrays.items())}
    return json.loads(json.dumps(state, default=repr).replace("NaN", '"nan"'))


def uninterrupted(mode: str, space: str, vec: str, path: Path) -> dict[str, Any]:
    """Run until the second step that ends every episode, save there, go on."""
    cur, envs = build(mode, space, vec, seed=0)
    try:
        envs.reset(seed=0)
        ended = 0
        while True:
            ids, rewards, dones = step(envs)
            if any(dones):
                assert all(dones), "the sub-envs must end their episodes in the same steps"
                ended += 1
                if ended == 2:
                    break
                if MODES[mode] == AutoresetMode.DISABLED:
                    envs.reset(options={"reset_mask": np.asarray(dones)})
        save_curriculum_state(path, cur, env=envs)
        with np.load(path) as z:  # saved tasks that are no longer in the pool
            rows = [z["channel_waiting"][:, None], z["channel_spares"]] if vec == "async" else []
            gone = [t for t in np.hstack(rows or [[]]).ravel().tolist() if t >= 0]
            gone = [t for t in gone if cur.slot_of(int(t)) is None]
        starts = next_starts(envs, mode)
        trace = stream(envs, mode, STEPS)
        rejections = sum(envs.unwrapped.get_attr("rejections"))
        state = final_state(cur, envs)
        return {"starts": starts, "trace": trace, "state": state, "rej": rejections, "gone": gone}
    finally:
        envs.close()
        cur.close()


def resumed(
    mode: str,
    space: str,
    vec: str,
    path: str,
    steps: int = STEPS,
    before_load: Callable[[Any], object] | None = None,
) -> dict[str, Any]:
    """A fresh run (another seed) that loads the checkpoint, resets once and steps on.

    ``before_load(envs)``, where given, runs the new envs before the load (envs that already ran).
    """
    cur, envs = build(mode, space, vec, seed=7)
    try:
        if before_load is not None:
            before_load(envs)
        load_curriculum_state(path, cur, env=envs)
        envs.reset(seed=123)  # the checkpoint's tasks and generator win over the seed
        starts = envs.task_ids.tolist()
        trace = stream(envs, mode, steps)
        return {"starts": starts, "trace": trace, "state": final_state(cur, envs)}
    finally:
        envs.close()
        cur.close()


def next_starts(envs: Any, mode: str) -> list[int]:
    """The tasks of the episodes that start next: reset step, done step or masked reset."""
    if MODES[mode] == AutoresetMode.NEXT_STEP:
        ids, rewards, _ = step(envs)
        assert rewards == [0.0] * N  # the reset step
        return ids
    if MODES[mode] == AutoresetMode.SAME_STEP:
        return [int(t) for t in envs.unwrapped.get_attr("task_id")]
    envs.reset(options={"reset_mask": np.ones(N, dtype=bool)})
    return envs.task_ids.tolist()
