import io
import math
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")

import torch as th

from gymcurric.errors import ConfigError, GymcurricWarning
from gymcurric.integrations.sb3.common.lagrangian import checked_schedule
from gymcurric.integrations.sb3.common.multipliers import (
    LagrangeMultiplier,
    PIDLagrangeMultiplier,
    make_multiplier,
    pid_kwargs_per_update,
)


def roundtrip(state):
    # what SB3's save/load does with it: torch.save, then torch.load(weights_only=True)
    f = io.BytesIO()
    th.save(state, f)
    f.seek(0)
    return th.load(f, weights_only=True)


def test_adam_rises_over_limit_and_returns_to_zero_under():
    lag = LagrangeMultiplier()  # OmniSafe: init 0.001, lr 0.035, Adam
    assert lag.value == pytest.approx(0.001)
    rising = [lag.update(40.0, 25.0) for _ in range(20)]
    assert np.all(np.diff(rising) > 0)
    # Adam's first step on a constant-sign gradient is lr (sign-like), whatever the violation
    assert rising[0] == pytest.approx(0.001 + 0.035, rel=1e-4)
    assert rising[-1] == pytest.approx(0.001 + 20 * 0.035, rel=0.05)
    falling = [lag.update(10.0, 25.0) for _ in range(200)]
    # Adam's momentum carries λ up for a few more updates, then it falls
    assert falling[15] < rising[-1]
    assert np.all(np.diff(falling[5:37]) < 0)
    assert falling[-1] == 0.0  # clamped at 0 and stays there
    assert min(falling) == 0.0


def test_sgd_is_plain_gradient_ascent_and_lr_scale():
    lag = LagrangeMultiplier(init=1.0, lr=0.1, optimizer="sgd")
    assert lag.update(30.0, 25.0) == pytest.approx(1.5)
    assert lag.update(30.0, 25.0, lr=0.2) == pytest.approx(2.5)
    assert lag.update(30.0, 25.0, lr_scale=0.0) == pytest.approx(2.5)
    assert lag.update(20.0, 25.0, lr_scale=2.0) == pytest.approx(1.5)
    assert lag.update(0.0, 25.0) == 0.0


def test_upper_bound():
    lag = LagrangeMultiplier(init=0.0, lr=10.0, optimizer="sgd", upper_bound=3.0)
    assert lag.update(100.0, 0.0) == 3.0


def test_pid_reference_sequence():
    pid = PIDLagrangeMultiplier(
        kp=0.1, ki=0.01, kd=0.01, init=0.001, d_delay=2, p_ema_alpha=0.5, d_ema_alpha=0.5
    )
    assert pid.value == 0.0  # as OmniSafe, the penalty is 0 before the first update
    # computed by hand from the CPPOPID formulas, cost limit 25:
    # step   delta  I      P        C_ema    D       lambda
    # 35     10     0.101  5        17.5     17.5    0.5 + 0.101 + 0.175
    # 45     20     0.301  12.5     31.25    31.25   1.25 + 0.301 + 0.3125
    # 15     -10    0.201  1.25     23.125   5.625   0.125 + 0.201 + 0.05625  (delay line: 17.5)
    # 0      -25    0      -11.875  11.5625  0       max(0, -1.1875)
    expected = [
        (0.101, 5.0, 17.5, 17.5, 0.776),
        (0.301, 12.5, 31.25, 31.25, 1.8635),
        (0.201, 1.25, 23.125, 5.625, 0.38225),
        (0.0, -11.875, 11.5625, 0.0, 0.0),
    ]
    for jc, (i, p, c, d, lam) in zip((35.0, 45.0, 15.0, 0.0), expected, strict=True):
        assert pid.update(jc, 25.0) == pytest.approx(lam)
        assert (pid.integral, pid.p_term, pid.cost_ema, pid.d_term) == pytest.approx((i, p, c, d))


def test_pid_defaults_and_penalty_max():
    pid = PIDLagrangeMultiplier()
    assert (pid.kp, pid.ki, pid.kd, pid.d_delay) == (0.1, 0.01, 0.01, 10)
    capped = PIDLagrangeMultiplier(ki=1.0, penalty_max=2.0)
    assert capped.update(100.0, 0.0) == 2.0
    scaled = PIDLagrangeMultiplier(kp=0.0, kd=0.0, ki=0.1, init=0.0)
    assert scaled.update(35.0, 25.0, lr_scale=0.5) == pytest.approx(0.5)


def test_pid_per_update_conversion_keeps_the_time_constants_in_env_steps():
    # one update per 20,000-step epoch (OmniSafe) against one per 2,000-step rollout: the same
    # cost seen over the same env steps gives the same λ at every epoch boundary
    gains = {"kp": 0.1, "ki": 0.01, "kd": 0.3, "init": 0.001}
    per_epoch = PIDLagrangeMultiplier(**gains)
    fine = pid_kwargs_per_update(gains, epoch_steps=20_000, update_steps=2_000)
    assert fine["ki"] == pytest.approx(0.001)
    assert fine["p_ema_alpha"] == fine["d_ema_alpha"] == pytest.approx(0.95**0.1)
    assert fine["d_delay"] == 100
    assert (fine["kp"], fine["kd"], fine["init"]) == (0.1, 0.3, 0.001)  # levels: unchanged
    per_rollout = PIDLagrangeMultiplier(**fine)
    costs = [40.0, 60.0, 30.0, 10.0, 5.0, 45.0, 50.0, 20.0, 0.0, 0.0, 35.0] * 3 + [0.0] * 20
    lams = []
    for jc in costs:
        want = per_epoch.update(jc, 25.0)
        for _ in range(10):
            got = per_rollout.update(jc, 25.0)
        lams.append(want)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert per_rollout.d_term == pytest.approx(per_epoch.d_term, rel=1e-9, abs=1e-12)
    assert max(lams) > 0.5 and min(lams) == 0.0  # the sequence exercised P, I, D and the clamp
    # without the conversion the per-rollout controller is ten times as fast on the integral
    raw = PIDLagrangeMultiplier(kp=0.0, kd=0.0, ki=0.01, init=0.0)
    conv = PIDLagrangeMultiplier(
        **pid_kwargs_per_update(
            {"kp": 0.0, "kd": 0.0, "init": 0.0}, epoch_steps=20_000, update_steps=2_000
        )
    )
    for _ in range(10):
        raw.update(35.0, 25.0)
        conv.update(35.0, 25.0)
    assert raw.value == pytest.approx(1.0) and conv.value == pytest.approx(0.1)


def test_pid_per_update_conversion_edge_cases_and_errors():
    same = pid_kwargs_per_update(None, epoch_steps=2048, update_steps=2048)
    assert same == {"ki": 0.01, "p_ema_alpha": 0.95, "d_ema_alpha": 0.95, "d_delay": 10}
    coarse = pid_kwargs_per_update({"d_delay": 3}, epoch_steps=1_000, update_steps=8_000)
    assert coarse["d_delay"] == 1  # never below one update
    assert coarse["ki"] == pytest.approx(0.08)
    with pytest.raises(ConfigError, match=r"epoch_steps.*0"):
        pid_kwargs_per_update(None, epoch_steps=0, update_steps=2048)
    with pytest.raises(ConfigError, match=r"update_steps.*2048\.0"):
        pid_kwargs_per_update(None, epoch_steps=20_000, update_steps=2048.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"unknown PID arguments \['upper_bound'\]"):
        pid_kwargs_per_update({"upper_bound": 3.0}, epoch_steps=20_000, update_steps=2048)
    with pytest.raises(ConfigError, match="d_delay"):
        pid_kwargs_per_update({"d_delay": 0}, epoch_steps=20_000, update_steps=2048)
    with pytest.raises(ConfigError, match="ki"):
        pid_kwargs_per_update({"ki": float("nan")}, epoch_steps=20_000, update_steps=2048)


@pytest.mark.parametrize("kind", ["adam", "sgd", "pid"])
def test_state_dict_resumes_exactly(kind):
    costs = [40.0, 35.0, 10.0, 50.0, 5.0, 30.0, 31.0, 2.0]
    a = make_multiplier(kind, init=0.5, lr=0.05)
    for jc in costs[:4]:
        a.update(jc, 25.0)
    b = make_multiplier(kind, init=0.0, lr=0.05)
    b.load_state_dict(roundtrip(a.state_dict()))
    assert b.value == a.value
    for jc in costs[4:]:
        assert b.update(jc, 25.0) == a.update(jc, 25.0)


def test_errors():
    with pytest.raises(ConfigError, match="lagrange_init"):
        LagrangeMultiplier(init=-1.0)
    with pytest.raises(ConfigError, match="optimizer"):
        LagrangeMultiplier(optimizer="rmsprop")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="multiplier"):
        make_multiplier("lbfgs", init=0.0, lr=0.1)
    with pytest.raises(ConfigError, match="d_delay"):
        PIDLagrangeMultiplier(d_delay=0)
    with pytest.raises(ConfigError, match="p_ema_alpha"):
        PIDLagrangeMultiplier(p_ema_alpha=1.0)
    lag = LagrangeMultiplier()
    with pytest.raises(ConfigError, match="cost_limit"):
        lag.update(1.0, -1.0)
    with pytest.raises(ConfigError, match="ep_cost"):
        lag.update("many", 1.0)  # a NaN is skipped and counted, not an error (see below)
    with pytest.raises(ConfigError, match="lr_scale"):
        lag.update(1.0, 1.0, lr_scale=-1.0)


def test_checked_schedule():
    s = checked_schedule("cost_limit", lambda p: 25.0 * p)
    assert s(1.0) == 25.0 and s(0.0) == 0.0
    assert checked_schedule("cost_limit", 3)(0.3) == 3.0
    with pytest.raises(ConfigError, match="cost_limit"):
        checked_schedule("cost_limit", -1.0)
    with pytest.raises(ConfigError, match="expected a number or a schedule"):
        checked_schedule("cost_limit", "25")
    with pytest.raises(ConfigError, match="returned 'x'"):
        checked_schedule("lagrange_lr", lambda p: "x")
    late = checked_schedule("lagrange_lr", lambda p: p - 0.5)  # fine at the start only
    with pytest.raises(ConfigError, match=r"progress_remaining=0\.2"):
        late(0.2)
    with pytest.raises(ConfigError, match="raised"):
        checked_schedule("lagrange_init", lambda: 1.0)


ABSURD = [1e30, 3e38, 1e39, 1e200, math.inf, -1e200, -math.inf]
CAP = 1e6  # multipliers.COST_CAP, the documented cap


def updates(lag, jc, n):
    """``n`` updates with J_c = ``jc``, and the messages of the warnings they gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = [lag.update(jc, 25.0) for _ in range(n)]
    return values, [str(w.message) for w in caught if issubclass(w.category, GymcurricWarning)]


@pytest.mark.parametrize("kind", ["adam", "sgd", "pid"])
@pytest.mark.parametrize("jc", ABSURD)
def test_absurd_episode_costs_are_saturated_and_counted(kind, jc):
    # issue 21: Adam froze λ at 0.001 for J_c of 1e30-3e38 and gave NaN from 1e39; SGD gave inf
    lag = make_multiplier(kind, init=0.001, lr=0.035)
    values, warned = updates(lag, jc, 4)
    assert all(math.isfinite(v) and v >= 0.0 for v in values), values
    # saturated, not frozen: exactly what J_c = ±CAP gives
    ref = make_multiplier(kind, init=0.001, lr=0.035)
    assert values == pytest.approx([ref.update(math.copysign(CAP, jc), 25.0) for _ in range(4)])
    if jc > 0 and kind != "pid":
        assert values[0] > 0.001  # it rose (Adam: by about lr)
    assert (lag.input_clipped, lag.input_skipped) == (4, 0)
    assert len(warned) == 1 and "saturated" in warned[0]  # warned once
    # and ordinary costs move it as usual afterwards
    assert math.isfinite(lag.update(10.0, 25.0)) and lag.input_clipped == 4


@pytest.mark.parametrize("kind", ["adam", "sgd", "pid"])
def test_nan_episode_cost_is_skipped_and_counted(kind):
    lag = make_multiplier(kind, init=0.5, lr=0.035)
    lag.update(40.0, 25.0)
    before = lag.state_dict()
    values, warned = updates(lag, math.nan, 2)
    assert values == [lag.value] * 2 and math.isfinite(lag.value)
    assert (lag.input_clipped, lag.input_skipped) == (0, 2)
    assert len(warned) == 1 and "NaN" in warned[0]
    twin = make_multiplier(kind, init=0.0, lr=0.035)
    twin.load_state_dict(roundtrip(before))
    # the skipped updates changed nothing but the counter
    assert lag.update(30.0, 25.0) == twin.update(30.0, 25.0)


@pytest.mark.parametrize("kind", ["adam", "sgd", "pid"])
def test_the_counters_are_saved(kind):
    lag = make_multiplier(kind, init=0.0, lr=0.035)
    updates(lag, 1e300, 1)
    updates(lag, math.nan, 1)
    other = make_multiplier(kind, init=0.0, lr=0.035)
    other.load_state_dict(roundtrip(lag.state_dict()))
    assert (other.input_clipped, other.input_skipped) == (1, 1)
    # a state saved before the counters existed still loads
    old = {k: v for k, v in lag.state_dict().items() if not k.startswith("input_")}
    other.load_state_dict(roundtrip(old))
    assert (other.input_clipped, other.input_skipped) == (0, 0)
