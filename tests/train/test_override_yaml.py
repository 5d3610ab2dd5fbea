"""``key=value`` overrides read as YAML: what the YAML reads that the text does not write."""

from __future__ import annotations

import pytest

from gymcurric.errors import ConfigError
from gymcurric.train.config import apply_overrides
from tests.train.override_errors import refused_override


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[!!set {a: &n }, *n]", "the item env.kwargs.x[1] (character 18: '*n', an alias of"),
        ("{s: !!set {a: &n }, t: *n}", "the value env.kwargs.x.t (character 24: '*n', an alias"),
        ("[!!set {a: &n ! }, {? *n : 1}]", "a key of env.kwargs.x[1] (character 23: '*n', an"),
    ],
)
def test_an_alias_of_a_set_value_left_empty_is_refused_where_it_is_read(text, where):
    # a !!set's values are null in YAML and not looked at, but an alias of one reads that null
    # elsewhere: [!!set {a: &n }, *n] was [{'a'}, None] with no null written
    error = refused_override(text)
    assert "reads part of it as null where no null is written: " + where in error.reason
    # the set alone, or an alias to a set's written value, stays as before
    out = apply_overrides({}, ["a.s=!!set {a: &n , b}", "a.t=[!!set {a: &n 1}, *n]"])
    assert out["a"] == {"s": {"a", "b"}, "t": [{"a"}, 1]}


def _calls(text: str) -> int:
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    apply_overrides({}, [f"a.x={text}"])
    profile.disable()
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def test_the_checks_of_a_long_value_take_time_linear_in_its_length():
    # the comment check looked at every YAML token for each '#' outside a comment: quadratic in
    # a long override of quoted '#'s (800 of them: 12x the Python calls of 200, not 4x)
    small, large = (_calls("[" + ", ".join(["'#'"] * n) + "]") for n in (200, 800))
    assert large < 5 * small, (small, large)
    assert apply_overrides({}, ["a.x=['#', 'a #b']"]) == {"a": {"x": ["#", "a #b"]}}


def test_a_long_key_is_cut_short_where_the_refusal_names_it():
    # each node's path held its keys whole: a 3,000-character key was in the message whole, and
    # copied into the path of every item under it (quadratic in a long override)
    key = "k" * 3000
    with pytest.raises(ConfigError) as info:
        apply_overrides({}, [f"a.x={{? {key} : [1, &b]}}"])
    where = f"the item a.x['{'k' * 60}... (3,000 characters)'][1] (character 3011: '&b'"
    assert where in info.value.reason
    assert len(info.value.reason) < 400
    with pytest.raises(ConfigError) as info:
        apply_overrides({}, [f"a.{key}=[1, &b]"])
    assert f"the item a.{'k' * 58}... (3,002 characters)[1]" in info.value.reason
