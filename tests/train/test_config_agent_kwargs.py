"""Numbers in ``agent.kwargs``: held by a float, not NaN, and no bool where one is wanted."""

from __future__ import annotations

import pytest

from gymcurric.errors import ConfigError
from gymcurric.train.config import TrainConfig, load_config

BIG = "1" + "0" * 400


@pytest.mark.parametrize(
    ("kwargs", "key", "got", "why"),
    [
        (f"{{gamma: {BIG}}}", "agent.kwargs.gamma", f"{BIG[:60]}... (401 characters)", "fit"),
        ("{n_steps: .nan}", "agent.kwargs.n_steps", "nan", "NaN"),
        (
            f"{{policy_kwargs: {{net_arch: {{pi: [64], vf: [{BIG}]}}}}}}",
            "agent.kwargs.policy_kwargs.net_arch.vf[0]",
            f"{BIG[:60]}... (401 characters)",
            "fit",
        ),
        (
            f"{{policy_kwargs: {{net_arch: [64, {BIG}]}}}}",
            "agent.kwargs.policy_kwargs.net_arch[1]",
            f"{BIG[:60]}... (401 characters)",
            "fit",
        ),
    ],
    ids=["int past float", "nan", "nested dict big int", "nested list big int"],
)
def test_a_number_in_agent_kwargs_must_fit_a_float(tmp_path, kwargs, key, got, why):
    # SB3/torch took these unchecked: a raw OverflowError at the first update
    path = tmp_path / "run.yaml"
    path.write_text(f"agent:\n  kwargs: {kwargs}\n")
    with pytest.raises(ConfigError, match=why) as info:
        load_config(path)
    assert info.value.key == key
    assert str(info.value.value) == str(got)
    assert info.value.source == str(path)


def test_a_big_int_given_as_an_override_or_from_python_is_refused_too():
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"agent.kwargs.n_steps={BIG}"])
    assert info.value.key == "agent.kwargs.n_steps"
    with pytest.raises(ConfigError) as info:
        TrainConfig.from_dict({"agent": {"kwargs": {"ent_coef": [0.0, 10**400]}}})
    assert info.value.key == "agent.kwargs.ent_coef[1]"


def test_infinity_stays_a_setting_in_agent_kwargs(tmp_path):
    # `.inf` is how a YAML config writes infinity (docs/training.md): max_grad_norm: .inf
    path = tmp_path / "run.yaml"
    path.write_text("agent:\n  kwargs: {max_grad_norm: .inf, policy_kwargs: {x: [-.inf]}}\n")
    kwargs = load_config(path).agent.kwargs
    assert kwargs["max_grad_norm"] == float("inf")
    assert kwargs["policy_kwargs"]["x"] == [float("-inf")]


def test_finite_numbers_bools_and_text_in_agent_kwargs_load_as_given():
    kwargs = {
        "gamma": 0.99,
        "n_steps": 2**64,  # a float holds it: SB3's business, not the config's
        "normalize_advantage": False,
        "ent_coef": "auto",
        "policy_kwargs": {"net_arch": [64, 64], "ortho_init": True},
        "target_kl": None,
    }
    cfg = TrainConfig.from_dict({"agent": {"kwargs": kwargs}})
    assert cfg.agent.kwargs == kwargs


@pytest.mark.parametrize(("name", "value"), [("gamma", True), ("n_steps", False)])
def test_a_bool_where_the_algorithm_wants_a_number_is_refused_before_it_is_built(name, value):
    # Python reads True as 1: gamma: true trained with a discount of 1.0, silently
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from gymcurric.train.build import check_no_bool_for_number

    with pytest.raises(ConfigError, match="not a bool") as info:
        check_no_bool_for_number(PPO, {"n_epochs": 2, name: value}, "run.yaml")
    assert (info.value.key, info.value.value) == (f"agent.kwargs.{name}", value)
    # a bool where the default is one, or a keyword whose default is None: as before
    check_no_bool_for_number(PPO, {"normalize_advantage": False, "target_kl": None}, "run.yaml")


def test_dry_run_refuses_a_bool_for_a_number(tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    from gymcurric.cli import main

    path = tmp_path / "run.yaml"
    path.write_text(
        "env: {id: gymcurric/HazardGrid-v0, num_envs: 1}\n"
        "agent: {kwargs: {gamma: true, n_steps: 64, batch_size: 64}}\nrun: {total_steps: 64}\n"
    )
    assert main(["train", "-c", str(path), "--dry-run"]) == 2
    assert "'agent.kwargs.gamma': True (expected a number, not a bool" in capsys.readouterr().err
