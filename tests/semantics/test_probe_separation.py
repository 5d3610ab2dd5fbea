"""Probe AUC of prompt sets on known states, and the warning when it shows no separation.

States are the stubs' ``"state v"`` captions (margin ``cos(vπ/8) - sin(vπ/8)``: 1, 0.54, 0,
-0.54, -1 for v = 0 ... 4), so the ranking every AUC below depends on is known exactly.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from gymcurric.errors import ConfigError, GymcurricWarning
from gymcurric.semantics import CallableEmbedder, Shaper, ShapingConfig
from gymcurric.semantics.probe import check_separation, probe_separation, separation_auc
from tests.semantics.stubs import STUB_CONFIG, caption_embedder, embed_texts, frame_embedder

STATES = ("state 0", "state 1", "state 3", "state 4")
UNSAFE = (False, False, True, True)


def brute_force_auc(margins, unsafe):
    safe = [m for m, u in zip(margins, unsafe, strict=True) if not u]
    bad = [m for m, u in zip(margins, unsafe, strict=True) if u]
    wins = sum(1.0 if s > b else 0.5 if s == b else 0.0 for s, b in itertools.product(safe, bad))
    return wins / (len(safe) * len(bad))


def shaper(**kw):
    return Shaper(ShapingConfig(**{**STUB_CONFIG, **kw}), caption_embedder())


def test_auc_of_perfect_reversed_tied_and_uninformative_margins():
    assert separation_auc([1.0, 0.5, -0.5, -1.0], UNSAFE) == 1.0
    assert separation_auc([-1.0, -0.5, 0.5, 1.0], UNSAFE) == 0.0
    assert separation_auc([0.2, 0.2, 0.2, 0.2], UNSAFE) == 0.5
    assert separation_auc([0.3, 0.1, -0.2, 0.1], UNSAFE) == 0.875  # one tie: half a win


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_the_pairwise_count_with_ties(seed):
    rng = np.random.default_rng(seed)
    margins = rng.integers(-3, 4, size=60) / 4.0  # many ties
    unsafe = rng.random(60) < 0.3
    assert separation_auc(margins, unsafe) == pytest.approx(brute_force_auc(margins, unsafe))


def test_auc_is_nan_without_both_groups_or_with_a_nan_margin_and_refuses_bad_shapes():
    assert np.isnan(separation_auc([0.1, 0.2], [False, False]))
    assert np.isnan(separation_auc([0.1, 0.2], [True, True]))
    assert np.isnan(separation_auc([0.1, np.nan], [True, False]))
    with pytest.raises(ConfigError, match="one label per margin"):
        separation_auc([0.1, 0.2, 0.3], [True, False])


@pytest.mark.parametrize(
    ("auc", "warns", "match"),
    [
        (0.5, True, "do not separate"),
        (0.549, True, "do not separate"),
        (0.451, True, "do not separate"),
        (0.3, True, "swapped"),
        (0.56, False, None),
        (1.0, False, None),
        (float("nan"), False, None),
    ],
)
def test_check_separation_warns_near_half_and_below(auc, warns, match):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok = check_separation(auc, 0.05, what="my prompts")
    gymcurric = [w for w in caught if issubclass(w.category, GymcurricWarning)]
    assert ok is not warns
    assert len(gymcurric) == int(warns)
    if warns:
        assert match in str(gymcurric[0].message) and "my prompts" in str(gymcurric[0].message)
    with pytest.raises(ConfigError, match="tolerance"):
        check_separation(auc, 0.6)


def test_shaper_set_up_probes_the_states_and_stays_quiet_when_they_separate():
    with warnings.catch_warnings():
        warnings.simplefilter("error", GymcurricWarning)
        s = shaper(probe_states=STATES, probe_unsafe=UNSAFE)
    assert s.ok and s.probe_auc == 1.0


def test_shaper_set_up_warns_when_the_prompt_sets_do_not_separate():
    # both sets embed to the same axis: every margin is 0, AUC 0.5
    with pytest.warns(GymcurricWarning, match="do not separate.*AUC 0.500"):
        s = shaper(unsafe_prompts=("safe too",), probe_states=STATES, probe_unsafe=UNSAFE)
    assert s.probe_auc == 0.5
    assert s.ok  # a warning, not a failure: the shaper still runs


def test_a_probe_warning_made_an_error_is_raised_not_a_failed_shaper():
    with warnings.catch_warnings():
        warnings.simplefilter("error", GymcurricWarning)
        with pytest.raises(GymcurricWarning, match="do not separate"):
            shaper(unsafe_prompts=("safe too",), probe_states=STATES, probe_unsafe=UNSAFE)


def test_shaper_set_up_warns_when_the_prompt_sets_are_swapped():
    with pytest.warns(GymcurricWarning, match="swapped"):
        s = shaper(
            safe_prompts=("unsafe",),
            unsafe_prompts=("safe",),
            probe_states=STATES,
            probe_unsafe=UNSAFE,
        )
    assert s.probe_auc == 0.0


def test_without_probe_states_nothing_is_probed():
    with warnings.catch_warnings():
        warnings.simplefilter("error", GymcurricWarning)
        s = shaper(unsafe_prompts=("safe too",))
    assert s.probe_auc is None
    with pytest.warns(GymcurricWarning, match="do not separate"):  # asked for: same check
        assert s.probe(STATES, UNSAFE) == 0.5
    assert s.probe_auc == 0.5


def test_probe_method_on_frames_and_probe_states_refused_for_a_frame_shaper():
    s = Shaper(ShapingConfig(**STUB_CONFIG), frame_embedder())
    frames = [np.full((8, 8, 3), v, dtype=np.uint8) for v in (0, 1, 3, 4)]
    assert s.probe(frames, UNSAFE) == 1.0 and s.probe_auc == 1.0
    with pytest.raises(ConfigError, match="probe_states"):
        Shaper(
            ShapingConfig(**STUB_CONFIG, probe_states=STATES, probe_unsafe=UNSAFE),
            frame_embedder(),
        )


@pytest.mark.parametrize(
    ("states", "unsafe", "match"),
    [
        (STATES, UNSAFE[:3], "one per probe state"),
        (STATES, (True,) * 4, "both safe and unsafe"),
        (STATES, (False,) * 4, "both safe and unsafe"),
        (STATES, (0, 0, 1, 1), "expected bools"),
        (("state 0", ""), (False, True), "non-empty strings"),
        ("state 0", (False,), "expected a list"),
    ],
)
def test_config_refuses_bad_probe_states(states, unsafe, match):
    with pytest.raises(ConfigError, match=match):
        ShapingConfig(probe_states=states, probe_unsafe=unsafe)


def test_config_probe_fields_round_trip_and_tolerance_is_checked():
    cfg = ShapingConfig(probe_states=list(STATES), probe_unsafe=list(UNSAFE), probe_tolerance=0.1)
    assert cfg.probe_states == STATES and cfg.probe_unsafe == UNSAFE
    assert ShapingConfig(**cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="probe_tolerance"):
        ShapingConfig(probe_tolerance=0.7)


def nan_state_embedder():
    def texts(items):
        rows = embed_texts([t for t in items if t != "state nan"] or ["safe"])
        out = [[np.nan, np.nan] if t == "state nan" else None for t in items]
        it = iter(rows)
        return np.array([r if r is not None else next(it) for r in out], dtype=np.float64)

    return CallableEmbedder(texts=texts, modality="text")


def test_a_nan_probe_auc_from_non_finite_state_embeddings_warns_at_set_up_and_never_raises():
    states, unsafe = ("state 0", "state nan", "state 3", "state 4"), UNSAFE
    with pytest.warns(GymcurricWarning, match="could not be computed.*non-finite") as caught:
        s = Shaper(
            ShapingConfig(**STUB_CONFIG, probe_states=states, probe_unsafe=unsafe),
            nan_state_embedder(),
        )
    assert np.isnan(s.probe_auc) and s.ok  # a warning, not a failure
    assert "1 of 4" in str(caught[0].message)


@pytest.mark.parametrize("margins", [[1.0, 0.5, 0.0, -1.0], [1.0, np.nan, 0.0, -1.0]])
def test_probe_separation_refuses_a_bad_tolerance_whether_or_not_the_auc_is_nan(margins):
    # check_separation refused it; a NaN AUC skipped that check, and the bad tolerance with it
    with pytest.raises(ConfigError, match="tolerance"):
        probe_separation(margins, UNSAFE, tolerance=0.7)
