"""The start-up probe warning on real Safety-Gymnasium captions (issue 26, item 3).

``test_probe_separation.py`` probes the stubs' ``"state v"`` captions. Here the probe states
are captions that ``SafetyPointGoal1-v0`` wrote, each labelled unsafe by the simulator's own
hazard cost (``info["cost_hazards"] > 0``), and the shaper is built by wrapping that env with
:class:`~gymcurric.wrappers.ShapeRewardSemantic`: prompt sets that cannot tell the states
apart warn when the wrapper is made, a set that does stays quiet. The embedder is a bag of
words (crc32 buckets, not ``hash()``, which is salted per process), so the AUCs are exact.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
import zlib
from typing import Any

import numpy as np
import pytest

from gymcurric.errors import GymcurricWarning
from gymcurric.semantics import CallableEmbedder
from gymcurric.wrappers.semantic import ShapeRewardSemantic

pytestmark = pytest.mark.safety

INSIDE = "The agent is inside a hazard."
CLEAR = "No obstacle is near."


def bag_of_words(texts: list[str]) -> np.ndarray:
    rows = np.zeros((len(texts), 64))
    for row, text in zip(rows, texts, strict=True):
        for word in re.findall(r"[a-z-]+", text.lower()):
            row[zlib.crc32(word.encode()) % 64] += 1.0
    return rows


@pytest.fixture(scope="module")
def known_states() -> tuple[Any, list[str], list[bool]]:
    """A captioning SafetyPointGoal1 env, and captions it wrote with the hazard cost's label."""
    pytest.importorskip("mujoco")
    if importlib.util.find_spec("safety_gymnasium") is None:
        pytest.skip("safety-gymnasium is not installed")
    import mujoco

    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env("SafetyPointGoal1-v0", caption=True)
    _, info = env.reset(seed=3)
    task = env.unwrapped.raw_env.task  # type: ignore[attr-defined]
    captions, unsafe = [info["caption"]], [False]
    for action in np.random.default_rng(3).uniform(-1, 1, (8, 2)):
        _, _, _, _, info = env.step(action)
        captions.append(info["caption"])
        unsafe.append(info["cost_hazards"] > 0)
    for k in range(3):  # put hazards under the agent: the simulator then charges hazard cost
        task.model.body_pos[task.model.body(f"hazard{k}").id][:2] = task.agent.pos[:2]
        mujoco.mj_forward(task.model, task.data)
        _, _, _, _, info = env.step(np.zeros(2))
        captions.append(info["caption"])
        unsafe.append(info["cost_hazards"] > 0)
    assert 3 <= sum(unsafe) < len(unsafe)  # both kinds of state
    # the captions say so exactly when the cost does (item 1, on these states)
    assert [c.startswith("The agent is inside") for c in captions] == unsafe
    env.reset(seed=3)
    yield env, captions, unsafe
    env.close()


def wrap(env: Any, safe: str, unsafe: str, states: list[str], labels: list[bool]) -> Any:
    """Wrap ``env`` as a user would, recording the warnings raised while the wrapper is made."""
    config = {
        "safe_prompts": [safe],
        "unsafe_prompts": [unsafe],
        "probe_states": states,
        "probe_unsafe": labels,
        "margin_norm_enable": False,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrapped = ShapeRewardSemantic(env, CallableEmbedder(texts=bag_of_words), config)
    probes = [w for w in caught if issubclass(w.category, GymcurricWarning)]
    return wrapped, probes


def test_prompts_that_separate_the_simulators_unsafe_states_stay_quiet(known_states) -> None:
    env, states, labels = known_states
    wrapped, probes = wrap(env, CLEAR, INSIDE, states, labels)
    assert probes == []
    assert wrapped.shaper.probe_auc == 1.0
    assert wrapped.status.startswith("ok")
    # and the wrapped env still runs, with the caption it shapes from
    _, info = wrapped.reset(seed=3)
    _, _, _, _, info = wrapped.step(np.zeros(2))
    assert isinstance(info["caption"], str) and "shaping" in info


@pytest.mark.parametrize(
    ("safe", "unsafe", "match"),
    [
        # the same sentence twice: every margin is 0, AUC 0.5
        ("The goal is far.", "The goal is far.", "do not separate|no separation"),
        # words no caption uses: every margin is 0 again
        ("Sunny weather.", "Rainy weather.", "do not separate|no separation"),
        # the right prompts, swapped: every unsafe state ranks above every safe one
        (INSIDE, CLEAR, "wrong way|swapped|unsafe states above"),
    ],
)
def test_prompts_that_do_not_separate_them_warn_when_the_wrapper_is_made(
    known_states, safe: str, unsafe: str, match: str
) -> None:
    env, states, labels = known_states
    wrapped, probes = wrap(env, safe, unsafe, states, labels)
    assert len(probes) == 1, [str(w.message) for w in probes]
    assert re.search(match, str(probes[0].message)), str(probes[0].message)
    auc = wrapped.shaper.probe_auc
    assert auc == 0.5 if safe != INSIDE else auc == 0.0
    assert wrapped.status.startswith("ok")  # a warning, not a failure: training goes on
