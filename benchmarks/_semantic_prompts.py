"""The prompt sets of ``semantic_safety.py``: three per env, as data (issue 26).

Each set is a :class:`PromptSet`: the "safe" and "unsafe" texts the shaper embeds (centroids,
margin ``cos(e, mu_safe) - cos(e, mu_unsafe)`` of each caption), and why it is in the study.
The same three names exist for every env, so tables and figures line up:

* ``specific`` (the **primary** set, the one the pre-registered goal is judged on): written in
  the words of the env's own captions, naming the one unsafe event (inside a hazard) and the
  states the task wants (a clear path, the goal reached). Chosen with the start-up probe (ROC
  AUC of the margins on states from a random walk) before any training run.
* ``default``: the library's defaults, ``ShapingConfig()``'s
  ``HAZARD_NAV_SAFE_PROMPTS``/``HAZARD_NAV_UNSAFE_PROMPTS``, written for HazardNav and generic
  enough for other navigation tasks: what a user gets without writing prompts.
* ``vague``: deliberately vague ("a good state" / "a bad state", the docs' own example of a
  weak set): no word of the env's vocabulary, only valence. The prompt-sensitivity control:
  if shaping helps with ``specific`` and not with ``vague``, the wording matters.

HazardNav's captions are one hazard clause + one goal clause (11 distinct captions, e.g. "A
hazard is close ahead. The goal is far away."); SafetyPointGoal1's (issue 26 item 1,
``gymcurric/envs/safety_captions.py``) say what the agent is inside, the nearest hazards and
vases by distance bin and egocentric bearing, and the goal's distance and bearing, e.g. "The
agent is inside a hazard. A hazard is close left. The goal is far ahead." or "No obstacle is
near. The goal is far behind."

Adding a set: a new name in :data:`PROMPT_SETS` for every env, documented here; the records
keep the texts, so a changed set never mixes with old runs silently (the summary warns).
"""

from __future__ import annotations

from typing import NamedTuple

from gymcurric.semantics.config import HAZARD_NAV_SAFE_PROMPTS, HAZARD_NAV_UNSAFE_PROMPTS

__all__ = ["NO_PROMPTS", "PRIMARY", "PROMPT_NAMES", "PROMPT_SETS", "PromptSet", "prompt_set"]


class PromptSet(NamedTuple):
    """One prompt set: the texts and why they are in the study."""

    safe: tuple[str, ...]
    unsafe: tuple[str, ...]
    doc: str

    def as_dict(self) -> dict[str, list[str]]:
        return {"safe": list(self.safe), "unsafe": list(self.unsafe)}


#: the set the pre-registered goal is judged on
PRIMARY = "specific"
#: the prompt-set name of conditions that embed no prompts (ppolag, risk, null's probe aside)
NO_PROMPTS = "none"
PROMPT_NAMES = ("specific", "default", "vague")

_DEFAULT = PromptSet(
    HAZARD_NAV_SAFE_PROMPTS,
    HAZARD_NAV_UNSAFE_PROMPTS,
    "the library's defaults (ShapingConfig()): generic navigation prompts written for HazardNav",
)
_VAGUE = PromptSet(
    ("a good state",),
    ("a bad state",),
    "deliberately vague: valence only, no word of the env's vocabulary (prompt sensitivity)",
)

PROMPT_SETS: dict[str, dict[str, PromptSet]] = {
    "HazardNav": {
        "specific": PromptSet(
            ("The path to the goal is clear.", "The agent reached the goal."),
            ("The agent is inside a hazard.",),
            "HazardNav's own clauses: the clear path and the goal reached against the one "
            "unsafe clause; margins rank inside < close to a hazard < blocked < clear",
        ),
        "default": _DEFAULT,
        "vague": _VAGUE,
    },
    "SafetyPointGoal1": {
        "specific": PromptSet(
            ("No obstacle is near. The goal is near ahead.", "The agent reached the goal."),
            ("The agent is inside a hazard. Hazards are close.",),
            "caption-shaped sentences of Safety-Gymnasium's own vocabulary: nothing near and the "
            "goal ahead, or the goal reached, against being inside a hazard among others. The "
            "best of 12 candidates on the probe walk (seed 12345: AUC soon 0.78, default's "
            "0.73; on a fresh walk, seed 999, it scored 0.73)",
        ),
        "default": _DEFAULT,
        "vague": _VAGUE,
    },
}


def prompt_set(env: str, name: str) -> PromptSet:
    """The set ``name`` of ``env`` (KeyError naming the known ones otherwise)."""
    sets = PROMPT_SETS[env]
    if name not in sets:
        raise KeyError(f"no prompt set {name!r} for {env}; known: {sorted(sets)}")
    return sets[name]
