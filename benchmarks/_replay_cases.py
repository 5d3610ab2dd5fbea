"""The implementations ``benchmarks/replay.py`` drives side by side, behind one small interface.

Each case gets the same per-step numpy data (what a Gymnasium/SB3 vector env hands over) and
exposes ``add(step)``, optionally ``seq(gen)`` (16 x 64 sequences) and ``uni(gen)`` (uniform
transitions), and ``nbytes`` (bytes of its storage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass
class Step:
    obs: np.ndarray
    next_obs: np.ndarray  # terminal obs where done (SB3 convention)
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: np.ndarray
    is_first: np.ndarray
    episode: np.ndarray  # int64, per env
    final_obs: np.ndarray | None
    infos: list[dict[str, Any]]


class Stream:
    """Synthetic vector-env steps: episodes of ``ep_len`` steps, staggered across envs.

    With ``device`` other than the CPU, obs, action and reward come as tensors already on the
    device (a GPU simulator's), and with ``flags="tensor"`` so do the flags; otherwise numpy.
    """

    def __init__(
        self,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: Any,
        seed: int = 0,
        device: str = "cpu",
        flags: str = "numpy",
    ):
        rng = np.random.default_rng(seed)
        self.E = num_envs
        pool = 32
        if np.dtype(obs_dtype) == np.uint8:
            frames = rng.integers(0, 256, (pool, num_envs, *obs_shape), dtype=np.uint8)
        else:
            frames = rng.standard_normal((pool, num_envs, *obs_shape)).astype(obs_dtype)
        self.frames = frames
        self.actions = rng.uniform(-1, 1, (pool, num_envs, 6)).astype(np.float32)
        self.rewards = rng.standard_normal((pool, num_envs)).astype(np.float32)
        self.ep_len = 500
        self.offset = (np.arange(num_envs) * 37) % self.ep_len
        self.k = 0
        self.episode = np.zeros(num_envs, np.int64)
        self.first = np.ones(num_envs, bool)
        self.device = device
        self.tensor_flags = flags == "tensor"
        if device != "cpu" or self.tensor_flags:
            self.on_device = {
                "obs": torch.from_numpy(frames).to(device),
                "action": torch.from_numpy(self.actions).to(device),
                "reward": torch.from_numpy(self.rewards).to(device),
            }
            self.flag_cache: dict[bytes, torch.Tensor] = {}

    def _device_flag(self, value: np.ndarray) -> torch.Tensor:
        # few distinct flag rows: cached, so no host->device copy is timed
        key = value.tobytes()
        cached = self.flag_cache.get(key)
        if cached is None:
            cached = self.flag_cache[key] = torch.from_numpy(value.copy()).to(self.device)
        return cached

    def next_device(self) -> Step:
        """The next step with obs/action/reward (and, with tensor flags, flags) on the device."""
        p = len(self.frames)
        k = self.k
        step = self.next()
        step.obs = self.on_device["obs"][k % p]
        step.action = self.on_device["action"][k % p]
        step.reward = self.on_device["reward"][k % p]
        if step.final_obs is not None:
            step.final_obs = self.on_device["obs"][(k + 7) % p]
        if self.tensor_flags:
            for key in ("terminated", "truncated", "is_first"):
                setattr(step, key, self._device_flag(getattr(step, key)))
        return step

    def next(self) -> Step:
        k = self.k
        p = len(self.frames)
        t_in_ep = (k + self.offset) % self.ep_len
        done = t_in_ep == self.ep_len - 1
        truncated = done & (np.arange(self.E) % 2 == 1)
        terminated = done & ~truncated
        obs = self.frames[k % p]
        nxt = self.frames[(k + 1) % p]
        final = self.frames[(k + 7) % p] if done.any() else None
        next_obs = (
            nxt if final is None else np.where(done.reshape(-1, *[1] * (obs.ndim - 1)), final, nxt)
        )
        step = Step(
            obs=obs,
            next_obs=next_obs,
            action=self.actions[k % p],
            reward=self.rewards[k % p],
            terminated=terminated,
            truncated=truncated,
            done=done,
            is_first=self.first.copy(),
            episode=self.episode.copy(),
            final_obs=final,
            infos=[{"TimeLimit.truncated": bool(x)} for x in truncated],
        )
        self.first = done
        self.episode = self.episode + done
        self.k += 1
        return step


# ----------------------------------------------------------------------------- minimal ring


def _tensor(x: Any) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))


class MinRing:
    """The limit: the same fields as ReplayRing, no checks, no side store, no episode logic.

    Time-major torch tensors; one flat int64 index per batch; ``index_select`` gathers.
    """

    def __init__(
        self,
        rows: int,
        E: int,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype,
        device: str = "cpu",
    ):
        self.T, self.E = rows, E
        self.device = device

        def z(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        self.obs = z((rows, E, *obs_shape), dtype=obs_dtype)
        self.action = z((rows, E, 6))
        self.reward = z((rows, E))
        self.cost = z((rows, E))
        self.cont = z((rows, E))
        self.first = z((rows, E), dtype=torch.bool)
        self.ep = z((rows, E), dtype=torch.int32)
        self.pos = 0
        self.size = 0
        self.ar = torch.arange(rows, device=device)
        self.shape = obs_shape
        self.zeros_cost = z((E,))

    @property
    def nbytes(self) -> int:
        ts = (self.obs, self.action, self.reward, self.cost, self.cont, self.first, self.ep)
        return sum(t.numel() * t.element_size() for t in ts)

    def add(self, s: Step) -> None:
        p = self.pos
        self.obs[p].copy_(_tensor(s.obs))
        self.action[p].copy_(_tensor(s.action))
        self.reward[p].copy_(_tensor(s.reward))
        self.cost[p].copy_(self.zeros_cost)
        self.cont[p].copy_(_tensor(~s.terminated))
        self.first[p].copy_(_tensor(s.is_first))
        self.ep[p].copy_(_tensor(s.episode))
        self.pos = (p + 1) % self.T
        self.size = min(self.size + 1, self.T)

    def seq(self, gen: torch.Generator, B: int = 16, L: int = 64) -> dict[str, torch.Tensor]:
        oldest = self.pos if self.size == self.T else 0
        start = torch.randint(self.size - L + 1, (B,), generator=gen, device=self.device)
        env = torch.randint(self.E, (B,), generator=gen, device=self.device)
        t = (self.ar[:L, None] + (start + oldest)[None, :]) % self.T
        flat = (t * self.E + env[None, :]).view(-1)
        out = {}
        for name in ("obs", "action", "reward", "cost", "cont", "first", "ep"):
            src = getattr(self, name)
            out[name] = (
                src.view(self.T * self.E, *src.shape[2:])
                .index_select(0, flat)
                .view(L, B, *src.shape[2:])
            )
        return out

    def uni(self, gen: torch.Generator, B: int = 256) -> tuple[torch.Tensor, ...]:
        oldest = self.pos if self.size == self.T else 0
        lg = torch.randint(self.size - 1, (B,), generator=gen, device=self.device)
        env = torch.randint(self.E, (B,), generator=gen, device=self.device)
        t = (lg + oldest) % self.T
        flat = t * self.E + env
        nflat = ((t + 1) % self.T) * self.E + env
        of = self.obs.view(self.T * self.E, *self.shape)
        return (
            of.index_select(0, flat),
            self.action.view(-1, 6).index_select(0, flat),
            self.reward.view(-1).index_select(0, flat),
            of.index_select(0, nflat),
            1.0 - self.cont.view(-1).index_select(0, flat),
        )


# ----------------------------------------------------------------------------- cases


#: ReplayRing's index_strategy in the ring case (None: its default; --index-strategy)
INDEX_STRATEGY: str | None = None


class RingCase:
    name = "ring"
    cuda_graphs = False

    def __init__(
        self, rows: int, E: int, obs_shape: tuple[int, ...], obs_dtype: Any, device: str = "cpu"
    ):
        from gymcurric.replay import ReplayRing

        tdt = torch.from_numpy(np.zeros(0, obs_dtype)).dtype
        fields = {"obs": (obs_shape, tdt), "action": ((6,), torch.float32)}
        options: dict[str, Any] = {"index_strategy": INDEX_STRATEGY}
        if self.cuda_graphs:
            options = {"index_strategy": "device", "cuda_graphs": True}
        self.ring = ReplayRing(rows, E, fields, device, **options)
        self.nbytes = self.ring.nbytes

    def add(self, s: Step) -> None:
        self.ring.push_step(
            s.obs,
            s.action,
            s.reward,
            terminated=s.terminated,
            truncated=s.truncated,
            final_obs=s.final_obs,
        )

    def seq(self, gen: torch.Generator) -> Any:
        return self.ring.sample_sequences(16, 64, gen)

    def uni(self, gen: torch.Generator) -> Any:
        return self.ring.sample_transitions(256, gen)


class RingGraphsCase(RingCase):
    """The ring with ``cuda_graphs=True``: uniform draws replay a CUDA graph (eager off CUDA)."""

    name = "ring_graphs"
    cuda_graphs = True


class MinRingCase:
    name = "minring"

    def __init__(
        self, rows: int, E: int, obs_shape: tuple[int, ...], obs_dtype: Any, device: str = "cpu"
    ):
        tdt = torch.from_numpy(np.zeros(0, obs_dtype)).dtype
        self.ring = MinRing(rows, E, obs_shape, tdt, device)
        self.nbytes = self.ring.nbytes
        self.add = self.ring.add

    def seq(self, gen: torch.Generator) -> Any:
        return self.ring.seq(gen)

    def uni(self, gen: torch.Generator) -> Any:
        return self.ring.uni(gen)


def _spaces(obs_shape: tuple[int, ...], obs_dtype: Any) -> tuple[Any, Any]:
    from gymnasium import spaces

    if np.dtype(obs_dtype) == np.uint8:
        obs_space = spaces.Box(0, 255, obs_shape, np.uint8)
    else:
        obs_space = spaces.Box(-np.inf, np.inf, obs_shape, np.float32)
    return obs_space, spaces.Box(-1, 1, (6,), np.float32)


class SB3Case:
    seq = None

    def __init__(
        self, rows: int, E: int, obs_shape: tuple[int, ...], obs_dtype: Any, optimize: bool
    ):
        import warnings

        from stable_baselines3.common.buffers import ReplayBuffer

        self.name = "sb3_opt" if optimize else "sb3"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.buf = ReplayBuffer(
                rows * E,
                *_spaces(obs_shape, obs_dtype),
                "cpu",
                E,
                optimize_memory_usage=optimize,
                handle_timeout_termination=not optimize,
            )
        names = ["observations", "actions", "rewards", "dones", "timeouts"]
        if not optimize:
            names.append("next_observations")
        self.nbytes = sum(getattr(self.buf, n).nbytes for n in names)

    def add(self, s: Step) -> None:
        self.buf.add(s.obs, s.next_obs, s.action, s.reward, s.done, s.infos)

    def uni(self, gen: torch.Generator) -> Any:
        return self.buf.sample(256)


class SB3RingCase:
    name = "sb3_api_ring"
    seq = None

    def __init__(self, rows: int, E: int, obs_shape: tuple[int, ...], obs_dtype: Any):
        from gymcurric.integrations.sb3.replay import RingReplayBuffer

        self.buf = RingReplayBuffer(rows * E, *_spaces(obs_shape, obs_dtype), "cpu", E)
        self.nbytes = self.buf.ring.nbytes + self.buf._next_np.nbytes

    def add(self, s: Step) -> None:
        self.buf.add(s.obs, s.next_obs, s.action, s.reward, s.done, s.infos)

    def uni(self, gen: torch.Generator) -> Any:
        return self.buf.sample(256)


def _td_nbytes(storage: Any) -> int:
    td = storage._storage
    return int(sum(t.numel() * t.element_size() for t in td.values(True, True)))


class TorchRLUniCase:
    name = "torchrl_uni"
    seq = None

    def __init__(self, rows: int, E: int, obs_shape: tuple[int, ...], obs_dtype: Any):
        from torchrl.data import LazyTensorStorage, ReplayBuffer

        self.storage = LazyTensorStorage(rows * E)
        self.rb = ReplayBuffer(storage=self.storage, batch_size=256)
        self.E = E
        self.nbytes = 0

    def add(self, s: Step) -> None:
        from tensordict import TensorDict

        td = TensorDict(
            {
                "obs": torch.from_numpy(s.obs),
                "next_obs": torch.from_numpy(s.next_obs),
                "action": torch.from_numpy(s.action),
                "reward": torch.from_numpy(s.reward),
                "done": torch.from_numpy(s.terminated),
            },
            batch_size=[self.E],
        )
        self.rb.extend(td)
        if not self.nbytes:
            self.nbytes = _td_nbytes(self.storage)

    def uni(self, gen: torch.Generator) -> Any:
        return self.rb.sample()


class TorchRLSeqCase:
    name = "torchrl_seq"
    uni = None

    def __init__(self, rows: int, E: int, obs_shape: tuple[int, ...], obs_dtype: Any):
        from torchrl.data import LazyTensorStorage, ReplayBuffer, SliceSampler

        # ndim=2: time-major storage [rows, E]; extends must be [E, T] (here T=1 per step)
        self.storage = LazyTensorStorage(rows * E, ndim=2)
        self.rb = ReplayBuffer(
            storage=self.storage,
            sampler=SliceSampler(slice_len=64, traj_key="episode"),
            batch_size=16 * 64,
        )
        self.E = E
        self.nbytes = 0

    def add(self, s: Step) -> None:
        from tensordict import TensorDict

        E = self.E
        td = TensorDict(
            {
                "obs": torch.from_numpy(s.obs).unsqueeze(1),
                "action": torch.from_numpy(s.action).unsqueeze(1),
                "reward": torch.from_numpy(s.reward).view(E, 1),
                "done": torch.from_numpy(s.terminated).view(E, 1),
                "is_first": torch.from_numpy(s.is_first).view(E, 1),
                "episode": torch.from_numpy(s.episode * E + np.arange(E)).view(E, 1),
            },
            batch_size=[E, 1],
        )
        self.rb.extend(td)
        if not self.nbytes:
            self.nbytes = _td_nbytes(self.storage)

    def seq(self, gen: torch.Generator) -> Any:
        return self.rb.sample()


def make_case(
    name: str,
    rows: int,
    E: int,
    obs_shape: tuple[int, ...],
    obs_dtype: Any,
    device: str = "cpu",
) -> Any:
    if name == "ring":
        return RingCase(rows, E, obs_shape, obs_dtype, device)
    if name == "ring_graphs":
        return RingGraphsCase(rows, E, obs_shape, obs_dtype, device)
    if name == "minring":
        return MinRingCase(rows, E, obs_shape, obs_dtype, device)
    if device != "cpu":
        raise ValueError(f"case {name!r} runs on the CPU only")
    if name == "sb3":
        return SB3Case(rows, E, obs_shape, obs_dtype, optimize=False)
    if name == "sb3_opt":
        return SB3Case(rows, E, obs_shape, obs_dtype, optimize=True)
    if name == "sb3_api_ring":
        return SB3RingCase(rows, E, obs_shape, obs_dtype)
    if name == "torchrl_uni":
        return TorchRLUniCase(rows, E, obs_shape, obs_dtype)
    if name == "torchrl_seq":
        return TorchRLSeqCase(rows, E, obs_shape, obs_dtype)
    raise ValueError(f"unknown case {name!r}")


#: the cases that run on another device (--device)
DEVICE_CASES = ("ring", "ring_graphs", "minring")
#: the default cases; EXTRA_CASES run when named
ALL_CASES = ("ring", "minring", "sb3", "sb3_opt", "sb3_api_ring", "torchrl_uni", "torchrl_seq")
EXTRA_CASES = ("ring_graphs",)
