"""The run-state codec and the episode replay behind an exact resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gymcurric.errors import DataError


def test_a_crafted_state_cannot_name_a_class_to_build(tmp_path):
    from gymcurric.train._runstate import decode

    with pytest.raises(DataError, match=r"os\.system"):
        decode({"$obj": "os.system", "vars": {}}, {})
    for name in (
        "gymcurric.train.runner.os.system",
        "gymcurric.train.runner.Path",
        "gymcurric.train.runner.os",
    ):
        with pytest.raises(DataError, match=r"not run state|unknown"):
            decode({"$obj": name, "vars": {}}, {})
    with pytest.raises(DataError, match="not run state"):
        decode({"$data": "gymcurric.train.runner.Path", "dict": {}}, {})


def test_state_codec_round_trips_plain_state():
    from collections import deque

    from gymcurric.train._runstate import decode, encode

    gen = np.random.default_rng(3)
    value = {
        "a": [1, 2.5, float("nan"), float("inf"), None, True, "x"],
        3: (np.arange(4), np.float32(2.0)),
        "g": gen,
        "d": deque([1, 2], maxlen=5),
        "t": torch.arange(3, dtype=torch.bfloat16),
        "tg": torch.Generator().manual_seed(5),
        "floats": [0.1 * i for i in range(40)],  # packed into one array
        "ints": list(range(-20, 20)),
        "mixed": [1, 2.0] * 10,
    }
    arrays: dict = {}
    tree = json.loads(json.dumps(encode(value, arrays)))
    back = decode(tree, arrays)
    assert back["a"][:2] == [1, 2.5] and np.isnan(back["a"][2]) and back["a"][3] == np.inf
    np.testing.assert_array_equal(back[3][0], np.arange(4))
    assert back[3][1] == np.float32(2.0) and back[3][1].dtype == np.float32
    assert back["g"].integers(1 << 30) == gen.integers(1 << 30)
    assert back["d"] == deque([1, 2], maxlen=5) and back["d"].maxlen == 5
    assert back["t"].dtype == torch.bfloat16 and torch.equal(back["t"], value["t"])
    assert torch.equal(torch.rand(2, generator=back["tg"]), torch.rand(2, generator=value["tg"]))
    for key in ("floats", "ints", "mixed"):
        assert back[key] == value[key]
        assert [type(v) for v in back[key]] == [type(v) for v in value[key]]
    assert "$list" in json.dumps(tree["$dict"][-3])


def test_episode_log_replays_a_six_tuple_env_exactly():
    import gymnasium as gym

    from gymcurric.train._runstate import EpisodeLog

    class SixTuple(gym.Env):
        observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float64)
        action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.x = self.np_random.normal(size=2)
            return self.x.copy(), {}

        def step(self, action):
            self.x = self.x + action + self.np_random.normal(size=2) * 0.1
            return self.x.copy(), 0.0, 1.0, False, False, {}

    a = EpisodeLog(SixTuple())
    a.reset(seed=4)
    a.reset()
    for _ in range(7):
        a.step(np.full(2, 0.5, np.float32))
    arrays: dict = {}
    saved = json.loads(json.dumps(a.episode_state(arrays)))
    b = EpisodeLog(SixTuple())
    b.replay(saved, arrays)
    act = np.full(2, -0.25, np.float32)
    np.testing.assert_array_equal(a.step(act)[0], b.step(act)[0])
    a.reset(), b.reset()  # the seeders continue alike
    np.testing.assert_array_equal(a.env.x, b.env.x)
