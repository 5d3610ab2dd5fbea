"""An int too large for a float (``10**400``) given to a shaping or risk-head parameter is a
ConfigError naming the parameter and the value cut short, not a raw ``OverflowError``."""

import pytest

from gymcurric.errors import ConfigError
from gymcurric.semantics.config import ShapingConfig

BIG = 10**400


@pytest.mark.parametrize(
    "name",
    [
        "beta_start",
        "beta_end_fraction",
        "gamma",
        "margin_scale",
        "clamp",
        "confidence_min",
        "probe_tolerance",
    ],
)
def test_shaping_config_numbers(name):
    with pytest.raises(ConfigError, match=rf"'{name}'.*\(401 characters\).*fit a float") as info:
        ShapingConfig(**{name: BIG})
    assert info.value.key == name


@pytest.mark.parametrize("name", ["risk_lr", "smooth_l1_beta", "grad_clip", "seed"])
def test_risk_head_parameters(name):
    pytest.importorskip("torch")
    from gymcurric.semantics.risk import RiskAnnotator, RiskHead

    for build in (lambda: RiskHead(2, **{name: BIG}), lambda: RiskAnnotator(1, **{name: BIG})):
        with pytest.raises(ConfigError, match=rf"'{name}'.*\(401 characters\)") as info:
            build()
        assert info.value.key == name


def test_risk_seeds_torch_takes_and_others():
    pytest.importorskip("torch")
    from gymcurric.semantics.risk import RiskHead

    for seed in (-(2**63), 2**64 - 2, 0):
        assert RiskHead(2, seed=seed).seed == seed
    for seed in (2**64 - 1, -(2**63) - 1, 1.5, "3", True):
        with pytest.raises(ConfigError, match="'seed'"):
            RiskHead(2, seed=seed)
    with pytest.raises(ConfigError, match="'hidden'"):
        RiskHead(2, hidden=64)


@pytest.mark.parametrize("size", [BIG, 2**63, 2**62])
@pytest.mark.parametrize("name", ["buffer_size", "metric_window", "history"])
def test_an_array_size_numpy_cannot_allocate_is_named(name, size):
    # numpy's words were the whole error: 'Maximum allowed dimension exceeded' (10**400,
    # 2**63), 'array is too big' (2**62); a MemoryError ('Unable to allocate 36.4 TiB') is
    # named too, but whether one comes depends on the machine's overcommit
    pytest.importorskip("torch")
    from gymcurric.semantics.risk import RiskAnnotator, RiskHead

    if name == "history":
        make = lambda: RiskAnnotator(1, **{name: size})  # noqa: E731
    else:
        make = lambda: RiskHead(3, **{name: size})  # noqa: E731
    with pytest.raises(ConfigError, match=rf"'{name}'.*too large for a float32 array") as info:
        make()
    assert info.value.key == name
