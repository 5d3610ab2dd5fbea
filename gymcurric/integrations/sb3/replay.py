"""``RingReplayBuffer``: SB3's ``replay_buffer_class`` backed by a :class:`ReplayRing`.

Observations are stored once (time-major, ``obs[t+1]`` is the next observation), terminal
observations of SB3's same-step autoreset go to the ring's side store, so it holds about half
of SB3's default memory for image observations and, unlike SB3's ``optimize_memory_usage``, it
keeps the true final observation of truncated episodes (so ``handle_timeout_termination`` works).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer, ReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

from gymcurric.errors import ConfigError
from gymcurric.replay._checks import copy_in
from gymcurric.replay.ring import FieldSpec, ReplayRing, Transitions

__all__ = ["RingReplayBuffer"]


_SOURCE = "RingReplayBuffer.add"


def _torch_dtype(dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


def _described(value: Any) -> Any:
    """``value`` for an error message: itself if short, else its type and shape or length."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= 40 else f"str of length {len(value)}"
    if isinstance(value, torch.Tensor):
        if value.is_nested:  # no shape
            return f"nested tensor of dtype {value.dtype} on {value.device}"
        return f"tensor of dtype {value.dtype} and shape {tuple(value.shape)} on {value.device}"
    if isinstance(value, np.ndarray):
        return f"array of dtype {value.dtype} and shape {value.shape}"
    try:
        return f"{type(value).__name__} of length {len(value)}"
    except TypeError:
        return f"a {type(value).__name__}"


#: Unsigned observation dtypes the ring stores as the signed dtype of the same width, bit for bit
#: (a view on the way in and out): torch lacks the indexed copies the ring needs on them.
_SIGNED_OF = {
    np.dtype(np.uint16): np.int16,
    np.dtype(np.uint32): np.int32,
    np.dtype(np.uint64): np.int64,
}


class RingReplayBuffer(ReplayBuffer):
    """Drop-in SB3 ``ReplayBuffer`` (SAC, TD3, DQN, ...) storing transitions in a ReplayRing.

    Pass it as ``SAC(..., replay_buffer_class=RingReplayBuffer)``. It returns the same
    transitions as SB3's ``ReplayBuffer`` for the same stored data (observation, action, the
    true next observation, reward and ``done * (1 - timeout)``), while each observation is
    stored once. ``optimize_memory_usage`` is accepted and ignored (memory is already optimised
    and reported as ``False`` so that SB3 takes its ordinary code paths); unlike SB3's
    memory-optimised buffer it may be combined with ``handle_timeout_termination``. When the
    algorithm was built with it, ``learn(reset_num_timesteps=True)`` marks the newest step done
    (``replay_buffer.dones[pos] = True``): that starts new episodes at the next step, and the
    newest step keeps its true next observation and is not made terminal (see :attr:`dones`).

    Observations keep their dtype; uint16/uint32/uint64 ones are stored bit for bit as the
    signed dtype of the same width (torch lacks operations the ring needs on them) and returned
    in their own dtype, as SB3's buffer returns them.

    Sampling uses the ring's own ``torch.Generator``, seeded from NumPy's global generator at
    construction, so ``model = SAC(..., seed=s)`` makes the batches reproducible; the generator
    state is saved by ``save_replay_buffer``. The ring lives on ``storage_device`` (default CPU;
    pass ``"cuda"`` to keep the buffer on the GPU) and batches are returned on SB3's ``device``.
    ``.ring`` is the underlying :class:`~gymcurric.replay.ReplayRing` (sequence sampling,
    invariant checks).

    Examples:
        >>> import numpy as np
        >>> from gymnasium import spaces
        >>> box = spaces.Box(-1, 1, (3,), np.float32)
        >>> buf = RingReplayBuffer(100, box, spaces.Discrete(2), device="cpu", n_envs=2)
        >>> o = np.zeros((2, 3), np.float32)
        >>> for _ in range(4):
        ...     buf.add(o, o + 1, np.array([0, 1]), np.ones(2), np.array([False, True]),
        ...             [{}, {"TimeLimit.truncated": True}])
        >>> batch = buf.sample(8)
        >>> batch.observations.shape, batch.actions.dtype, float(batch.dones.sum())
        (torch.Size([8, 3]), torch.int64, 0.0)

    (In training: ``SAC("MlpPolicy", env, replay_buffer_class=RingReplayBuffer)``.)
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        device: torch.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        *,
        storage_device: torch.device | str = "cpu",
        side_capacity: int | None = None,
        memory_budget: int | None = None,
    ) -> None:
        """Create the buffer (arguments as SB3's ``ReplayBuffer``, plus the ring's).

        Args:
            buffer_size: transitions kept, all envs together (``buffer_size // n_envs`` rows).
            observation_space: the env's observation space (Box, Discrete, MultiDiscrete,
                MultiBinary; Dict spaces need SB3's ``DictReplayBuffer``).
            action_space: the env's action space.
            device: where sampled batches go (SB3's ``device``).
            n_envs: number of envs of the vec env.
            optimize_memory_usage: ignored (see the class docstring).
            handle_timeout_termination: treat ``TimeLimit.truncated`` ends as non-terminal.
            storage_device: where the ring lives.
            side_capacity: terminal-observation slots (default: ``rows * n_envs // 8`` for
                observations up to 4 KiB, ``// 32`` for larger ones, at least ``4 * n_envs``).
            memory_budget: bytes the ring may use (default: what is available).
        """
        if isinstance(observation_space, spaces.Dict):
            raise ConfigError(
                "observation_space",
                observation_space,
                "Dict observations are not supported; use SB3's DictReplayBuffer",
                source="RingReplayBuffer",
            )
        BaseBuffer.__init__(
            self, buffer_size, observation_space, action_space, device, n_envs=n_envs
        )
        self.buffer_size = max(buffer_size // n_envs, 2)
        self.optimize_memory_usage = False
        self.handle_timeout_termination = handle_timeout_termination
        self._signed = _SIGNED_OF.get(np.dtype(observation_space.dtype))
        obs_dtype = _torch_dtype(self._signed or observation_space.dtype)
        # observations SB3 reshapes (its buffer's shape is (1,), a vec env's []), and actions
        # as the ring stores them (SB3's: float64 ones as float32)
        self._discrete_obs = isinstance(observation_space, spaces.Discrete)
        self._action_dtype = np.dtype(self._maybe_cast_dtype(action_space.dtype))
        act_dtype = _torch_dtype(self._action_dtype)
        obs_spec = FieldSpec(tuple(self.obs_shape), obs_dtype)
        fields = {"obs": obs_spec, "action": FieldSpec((self.action_dim,), act_dtype)}
        if side_capacity is None:
            rows = self.buffer_size * n_envs
            small = obs_spec.nbytes_per_row(1) <= 4096
            side_capacity = max(4 * n_envs, rows // 8 if small else rows // 32)
        self.ring = ReplayRing(
            self.buffer_size,
            n_envs,
            fields,
            storage_device,
            side_capacity=side_capacity,
            # follows SB3's seeding (set_random_seed seeds NumPy's global generator first)
            seed=int(np.random.randint(2**31 - 1)),  # noqa: NPY002
            memory_budget=memory_budget,
        )
        # the next observation of the newest row (SB3 hands it over one add early); kept on
        # the host for the stream-break check, mirrored on the ring's device when not the CPU
        self._next_np = np.zeros((n_envs, *self.obs_shape), dtype=observation_space.dtype)
        self._next_dev: torch.Tensor | None = None
        # a float32 action goes in as a CPU tensor view only when the ring is on the CPU: a
        # ring on another device refuses CPU tensors and copies numpy arrays itself
        self._cpu_ring = self.ring.device.type == "cpu"
        if not self._cpu_ring:
            self._next_dev = torch.zeros(
                (n_envs, *self.obs_shape), dtype=obs_dtype, device=self.ring.device
            )
        self._prev_done = np.ones(n_envs, dtype=bool)
        #: Rows SB3 marked done. With ``optimize_memory_usage=True``, ``learn(reset_num_timesteps=
        #: True)`` marks the newest one (``dones[pos] = True``) before it resets the env, as its
        #: memory-optimised buffer would otherwise take the reset observation for that step's
        #: next one. Here the newest step keeps its true next observation and is not made
        #: terminal: the next ``add`` starts a new episode in every env, as it does when the
        #: observation stream breaks. (The ring holds the episode ends: ``ring["continue_"]``.)
        self.dones = np.zeros((self.buffer_size, n_envs), dtype=bool)

    # an attribute of buffers pickled before it existed (save_replay_buffer)
    _signed: Any = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "dones" not in state:
            self.dones = np.zeros((self.buffer_size, self.n_envs), dtype=bool)
        if "_cpu_ring" not in state:
            self._cpu_ring = self.ring.device.type == "cpu"
        if "_action_dtype" not in state:
            self._discrete_obs = isinstance(self.observation_space, spaces.Discrete)
            self._action_dtype = np.dtype(self._maybe_cast_dtype(self.action_space.dtype))

    def _stored(self, obs: np.ndarray) -> np.ndarray:
        """Observations as the ring stores them (a view)."""
        return obs if self._signed is None else obs.view(self._signed)

    def _returned(self, obs: torch.Tensor) -> torch.Tensor:
        """Stored observations in the observation space's dtype (a view)."""
        if self._signed is None:
            return obs
        return obs.view(getattr(torch, self._next_np.dtype.name))

    # SB3 reads these as attributes
    @property
    def pos(self) -> int:
        """Next row to write (SB3's ``pos``)."""
        return self.ring.head if hasattr(self, "ring") else 0

    @pos.setter
    def pos(self, value: int) -> None:
        if hasattr(self, "ring") and value != self.ring.head:
            raise ConfigError("pos", value, "the ring's write position cannot be moved")

    @property
    def full(self) -> bool:
        """Whether every row has been written (SB3's ``full``)."""
        return self.ring.full if hasattr(self, "ring") else False

    @full.setter
    def full(self, value: bool) -> None:
        if hasattr(self, "ring") and value != self.ring.full:
            raise ConfigError("full", value, "follows the ring; use reset() to empty it")

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one vec-env step (SB3's signature; ``next_obs`` holds terminal observations).

        Every argument is converted and checked before anything changes: a refused step raises
        a :class:`~gymcurric.errors.ConfigError` naming the parameter and what was received
        (a sparse or nested tensor, ``None``, an array of another shape or of strings, objects
        or complex numbers, and with ``handle_timeout_termination`` infos that are not a list
        of dicts, one per env or a single one for all as SB3 broadcasts it) and leaves the
        buffer and its ring as they were. Tensors with torch's negative bit (views numpy cannot
        read) and tensors that require grad are stored as their values (detached), as the
        ring's pushes store them. Without timeout handling ``infos`` are not read, as
        in SB3. The buffer keeps no reference to the arguments.

        Raises:
            ConfigError: an argument that cannot be stored (see above).
        """
        n = self.n_envs
        obs_shape = (n, *self.obs_shape)
        obs_dtype = self._next_np.dtype  # the observation space's
        # SB3's usual inputs pass these tests as they are; anything else is converted (cast like
        # SB3's own buffer does when it assigns into its arrays) and checked by _checked
        if not (type(obs) is np.ndarray and obs.dtype == obs_dtype and obs.shape == obs_shape):
            obs = self._checked("obs", obs, obs_dtype, obs_shape, self._discrete_obs)
        if not (
            type(next_obs) is np.ndarray
            and next_obs.dtype == obs_dtype
            and next_obs.shape == obs_shape
        ):
            next_obs = self._checked("next_obs", next_obs, obs_dtype, obs_shape, self._discrete_obs)
        act_shape = (n, self.action_dim)
        if not (
            type(action) is np.ndarray
            and action.dtype == self._action_dtype
            and action.shape == act_shape
        ):
            action = self._checked("action", action, self._action_dtype, act_shape, True)
        if action.dtype == np.float32 and self._cpu_ring and action.flags.writeable:
            # (torch.from_numpy warns on a read-only array, e.g. np.asarray of a JAX array:
            # the ring's checks take those as they are and copy them)
            try:
                stored_action: np.ndarray | torch.Tensor = torch.from_numpy(action)
            except ValueError:  # negative strides
                stored_action = torch.from_numpy(action.copy())
        else:
            stored_action = action
        if not (type(reward) is np.ndarray and reward.dtype == np.float32 and reward.shape == (n,)):
            reward = self._checked("reward", reward, np.dtype(np.float32), (n,), True)
        if not (type(done) is np.ndarray and done.dtype == np.bool_ and done.shape == (n,)):
            done = self._checked("done", done, np.dtype(np.bool_), (n,), True)
        # infos are read as SB3's buffer reads them: only with timeout handling, any iterable of
        # dicts, one of them for every env (SB3 broadcasts it)
        if self.handle_timeout_termination:
            try:
                truncated = np.array([bool(i.get("TimeLimit.truncated", False)) for i in infos])
            except (AttributeError, TypeError, ValueError, RuntimeError) as err:
                # RuntimeError: bool() of a tensor of several values (or of no data: meta)
                raise self._bad_infos(infos) from err
            if truncated.shape != (n,) and truncated.shape != (1,):
                raise self._bad_infos(infos)
            timeout = truncated & done
        else:
            timeout = np.zeros(n, dtype=bool)
        # everything is checked: from here on nothing raises on the arguments
        ring = self.ring
        is_first = self._prev_done.copy()
        if ring.total_steps > 0 and not is_first.all():
            # the stream broke without an episode end (env reset between learn() calls, or SB3
            # cut it: see dones): keep the next obs SB3 gave for the previous row and start a
            # new episode here
            row = (ring.head - 1) % ring.capacity
            now, then = obs.reshape(n, -1), self._next_np.reshape(n, -1)
            differs = (now != then).any(axis=1)
            broke = (differs | self.dones[row]) & ~is_first
            if broke.any():
                if obs_dtype.kind == "f":  # NaNs at the same places are the same observation
                    differs = ((now != then) & ~(np.isnan(now) & np.isnan(then))).any(axis=1)
                    broke &= differs | self.dones[row]
                if broke.any():
                    ring.attach_final_obs(row, self._stored(self._next_np), broke)
                    is_first |= broke
        if ring.total_steps > 0:
            self.dones[(ring.head - 1) % ring.capacity] = False
        ring.push_step(
            self._stored(obs),
            stored_action,
            reward,
            terminated=done & ~timeout,
            truncated=timeout,
            is_first=is_first,
            final_obs=self._stored(next_obs) if done.any() else None,
        )
        np.copyto(self._next_np, next_obs)
        if self._next_dev is not None:
            # as the ring's own writes copy host data: non-blocking where the ring decided so
            # (CUDA stages pageable memory before the call returns, so the next add may rewrite
            # _next_np; a blocking copy would synchronise the stream at every env step), and
            # blocking from pinned memory or where the ring decided so (MPS, pytorch#189690)
            source = torch.from_numpy(self._stored(self._next_np))
            copy_in(self._next_dev, source, non_blocking=self.ring.non_blocking)
        self._prev_done = done.copy()  # not the caller's array (or a view of it)

    def _checked(
        self, name: str, value: Any, dtype: np.dtype[Any], shape: tuple[int, ...], reshape: bool
    ) -> Any:
        """``value`` as a ``shape`` array of ``dtype`` (an ``add`` argument not in SB3's form).

        Numbers (bool, int, float) of any dtype are cast to ``dtype`` as SB3's buffer casts on
        assignment, except that actions keep their kind (floats for a discrete action space are
        refused, as the ring refuses them). With ``reshape``, any shape of the same size is
        taken, as SB3 reshapes actions, rewards, dones and observations of Discrete spaces.
        A tensor must be dense (not sparse, not nested), on the CPU and of a dtype numpy has;
        one that requires grad or has torch's negative or conjugate bit gives its values.
        """
        if reshape and type(value) is np.ndarray and value.dtype == dtype:
            try:  # SB3's usual form of Discrete actions and observations: [n_envs]
                return value.reshape(shape)
            except ValueError:  # another size: refused below
                pass
        if isinstance(value, torch.Tensor):
            if value.layout is not torch.strided or value.is_nested:
                raise ConfigError(
                    name,
                    f"tensor of layout {value.layout}"
                    if value.layout is not torch.strided
                    else "nested tensor",
                    "expected a dense (strided) tensor or a numpy array",
                    source=_SOURCE,
                )
            if value.requires_grad:  # its values: the ring's pushes store data (detached)
                value = value.detach()
            # numpy cannot read a tensor with torch's negative or conjugate bit (views such as
            # z.conj().imag, z.conj()): their values, as the ring's pushes store them (no-ops
            # without the bits; a complex one is then refused as any complex array is)
            value = value.resolve_conj().resolve_neg()
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError, RuntimeError) as err:  # CUDA tensors, ragged lists...
            raise ConfigError(
                name,
                _described(value),
                f"expected numbers of shape {shape} (a numpy array, or a tensor numpy can read)",
                source=_SOURCE,
            ) from err
        if arr.dtype.kind not in "biuf":
            raise ConfigError(
                name,
                None if value is None else f"array of dtype {arr.dtype} and shape {arr.shape}",
                f"expected numbers (bool, int or float) of shape {shape}",
                source=_SOURCE,
            )
        if name == "action" and not np.can_cast(arr.dtype, dtype, "same_kind"):
            raise ConfigError(
                name,
                f"array of dtype {arr.dtype}",
                f"cannot be stored as {dtype} without changing its kind",
                source=_SOURCE,
            )
        if arr.shape != shape:
            if not (reshape and arr.size == math.prod(shape)):
                raise ConfigError(
                    name, f"array of shape {arr.shape}", f"expected shape {shape}", source=_SOURCE
                )
            arr = arr.reshape(shape)
        return arr.astype(dtype, copy=False)

    def _bad_infos(self, infos: Any) -> ConfigError:
        """The error of an ``infos`` that is not a list of dicts, one per env or one for all."""
        return ConfigError(
            "infos",
            _described(infos),
            f"expected a list of {self.n_envs} dicts, one per env (or one for all)",
            source=_SOURCE,
        )

    def _pending(self) -> torch.Tensor:
        if self._next_dev is not None:
            return self._next_dev
        return torch.from_numpy(self._stored(self._next_np))

    def reset(self) -> None:
        """Empty the buffer (memory is kept)."""
        self.ring.clear()
        self._prev_done = np.ones(self.n_envs, dtype=bool)
        self.dones[:] = False

    def size(self) -> int:
        """Transitions per env currently stored."""
        return self.ring.size

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> ReplayBufferSamples:
        """``batch_size`` transitions uniformly over stored steps and envs (SB3's contract)."""
        tr = self.ring.sample_transitions(batch_size, self.ring.generator, next_obs=self._pending())
        return self._to_samples(tr, env)

    def _get_samples(
        self, batch_inds: np.ndarray, env: VecNormalize | None = None
    ) -> ReplayBufferSamples:
        # SB3's hook: rows given, envs drawn from NumPy's global generator as SB3 does.
        env_indices = np.random.randint(0, high=self.n_envs, size=(len(batch_inds),))  # noqa: NPY002
        return self.transitions_at(batch_inds, env_indices, env)

    def transitions_at(
        self, batch_inds: np.ndarray, env_indices: np.ndarray, env: VecNormalize | None = None
    ) -> ReplayBufferSamples:
        """The transitions at rows ``batch_inds`` (SB3's ``pos``) of envs ``env_indices``."""
        tr = self.ring.transitions_at(batch_inds, env_indices, next_obs=self._pending())
        return self._to_samples(tr, env)

    def _to_samples(self, tr: Transitions, env: VecNormalize | None) -> ReplayBufferSamples:
        obs, next_obs = self._returned(tr.obs), self._returned(tr.next_obs)
        reward = tr.reward.view(-1, 1)
        if env is not None:
            dtype = self._next_np.dtype  # the observations' own, if stored as signed
            obs_np = tr.obs.cpu().numpy().view(dtype)
            next_np = tr.next_obs.cpu().numpy().view(dtype)
            obs = torch.from_numpy(self._normalize_obs(obs_np, env))
            next_obs = torch.from_numpy(self._normalize_obs(next_np, env))
            reward = torch.from_numpy(self._normalize_reward(reward.cpu().numpy(), env))
        dev = self.device
        return ReplayBufferSamples(
            observations=obs.to(dev),
            actions=tr.action.to(dev),
            next_observations=next_obs.to(dev),
            dones=tr.done.view(-1, 1).to(dev),
            rewards=reward.to(dev),
        )
