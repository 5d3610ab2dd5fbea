"""An integer too large for a float where a number is read: an error naming it, no traceback.

JSON and YAML read ``1`` followed by 400 zeros as a Python int; ``math.isfinite`` on it raised
``OverflowError: int too large to convert to float`` from the readers' number checks.
"""

from __future__ import annotations

import json

import pytest

from gymcurric.datapacks import DataPack, load_curriculum_config, load_datapacks
from gymcurric.errors import ConfigError, DataError

from .packs import record

BIG = 10**400
CUT = "'100000000000000000000000000000000000000000000000000000000000... (401 characters)'"


@pytest.mark.parametrize(
    ("field", "overrides"),
    [
        ("mpl_gain", {"mpl_gain": BIG}),
        ("sampling_weight", {"sampling_weight": -BIG}),
        ("objective_vector", {"objective_vector": [1.0, BIG]}),
        ("enrichment.risk", {"enrichment": {"risk": BIG}}),
    ],
)
def test_a_record_number_too_large_for_a_float_names_file_line_field_and_value(
    tmp_path, field, overrides
):
    f = tmp_path / "a.jsonl"
    f.write_text(json.dumps(record("a")) + "\n" + json.dumps(record("b", **overrides)) + "\n")
    with pytest.raises(DataError) as info:  # was OverflowError
        load_datapacks(f)
    message = str(info.value)
    assert message.startswith(f"{f}, line 2: field {field!r}: expected a")
    assert "0000000000... (40" in message and len(message) < 400, message  # the value, cut


def test_an_integer_python_will_not_write_is_named_by_its_bits():
    # repr() of an int of more than 4,300 digits raises ValueError: the message cannot show it
    with pytest.raises(DataError, match=r"field 'mpl_gain': .*got '<int of 16,610 bits>'"):
        DataPack.from_dict(record("a", mpl_gain=10**5000))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("rules: [{metric: error_rate, threshold: BIG}]", "stages[0].rules[0].threshold"),
        ("strategy_params: {tier_ratios: {0: BIG}}", "stages[0].strategy_params.tier_ratios[0]"),
        (
            "strategy: frontier_prioritized\n    strategy_params: {safety_boost_factor: BIG}",
            "stages[0].strategy_params.safety_boost_factor",
        ),
        # accepted before (BIG < inf), to fail once the sampler multiplied by it
        (
            "weight_multipliers: {safety_critical: BIG}",
            "stages[0].weight_multipliers['safety_critical']",
        ),
    ],
)
def test_a_curriculum_number_too_large_for_a_float_names_file_key_and_value(tmp_path, text, key):
    pytest.importorskip("yaml")
    f = tmp_path / "cur.yaml"
    stage = text if "strategy:" in text else f"strategy: balanced\n    {text}"
    f.write_text("stages:\n  - name: a\n    " + stage.replace("BIG", str(BIG)) + "\n")
    with pytest.raises(ConfigError) as info:  # was OverflowError (but weight_multipliers)
        load_curriculum_config(f)
    assert (info.value.key, info.value.source) == (key, str(f))
    assert repr(info.value.value) == CUT
    assert "an integer this large does not fit a float" in str(info.value)
