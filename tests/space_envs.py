"""Environments over arbitrary spaces for the space tests; importing this module registers their ids (reach them
from a config as ``tests.space_envs:<Id>``, or the classes as ``tests.space_envs:<Class>``).

- :func:`generated_spaces`: a seeded generator of observation and action spaces (every kind lit_ppo knows, nested,
  plus a few it does not), and :class:`GeneratedEnv`, which plays the spaces of one generated case
  (``LitPPOTest/Generated-v0``, ``env_kwargs={"case": i, "masks": ...}``: plain data, so checkpoints and exported
  files name it); :func:`generated_settings`, how each case trains.
- :class:`ScalarEnv` (a 0-d ``Box`` observation) and :class:`ScalarDictEnv` (a ``Dict`` with a 0-d part):
  ``Discrete(3)`` actions, one of them invalid at each step (``action_masks()`` and ``info["action_mask"]``).
- :class:`ScalarVectorEnv`: ``ScalarEnv``'s vector implementation (next-step autoreset, no masks), registered with it
  as ``LitPPOTest/Scalar-v0`` for ``vectorization: native``.
"""

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

# A seed from 20261203 on whose 14 cases cover every kind with 9 fits (test_space_generator.py checks the kinds).
SEED = 20261447
FLOATS = (np.float32, np.float64, np.float16)
INTEGERS = (np.int8, np.int32, np.int64, np.uint8)


def _shape(rng: np.random.Generator, rank: int) -> tuple[int, ...]:
    shape = [int(n) for n in rng.integers(1, 4, size=rank)]
    if rank and rng.random() < 0.04:  # now and then an axis of size 0: a space with no values
        shape[int(rng.integers(rank))] = 0
    return tuple(shape)


def _box(rng: np.random.Generator, floating: bool) -> spaces.Box:
    """A Box of rank 0-3 with bounds bounded, unbounded or half-bounded (floats), or an integer or bool Box."""
    shape = _shape(rng, int(rng.choice(4, p=[0.4, 0.2, 0.2, 0.2])))  # rank 0 most: the case of issue #46
    dtype = FLOATS[rng.integers(len(FLOATS))] if floating or rng.random() < 0.6 else \
        (INTEGERS + (np.bool_,))[rng.integers(len(INTEGERS) + 1)]
    if dtype == np.bool_:
        return spaces.Box(0, 1, shape, np.bool_)
    if np.issubdtype(dtype, np.integer):
        return spaces.Box(-3 if dtype != np.uint8 else 0, 7, shape, dtype)  # uint8 0..7: not an image
    low, high = [(-1.0, 1.0), (-np.inf, np.inf), (0.0, np.inf), (-50.0, 200.0)][rng.integers(4)]
    return spaces.Box(low, high, shape, dtype)


def _image(rng: np.random.Generator) -> spaces.Box:
    # Mostly small (flattened pixels); sometimes 36 x 36, the smallest the Nature CNN takes.
    side = 36 if rng.random() < 0.3 else int(rng.integers(3, 8))
    shape = [(side, side), (side, side, 1), (2, side, side), (side, side, 3)][rng.integers(4)]
    return spaces.Box(0, 255, shape, np.uint8)


def _leaf(rng: np.random.Generator) -> spaces.Space:
    kind = rng.integers(6)
    if kind <= 1:
        return _box(rng, floating=False)
    if kind == 2:
        return spaces.Discrete(int(rng.integers(1, 5)), start=int(rng.integers(-3, 4)))
    if kind == 3:
        nvec = rng.integers(2, 4, size=_shape(rng, int(rng.integers(1, 3))))
        return spaces.MultiDiscrete(nvec, start=rng.integers(-2, 3, size=nvec.shape))
    if kind == 4:
        return spaces.MultiBinary(int(rng.integers(1, 4)) if rng.random() < 0.5 else [2, 3])
    return _image(rng)


def _observation(rng: np.random.Generator, depth: int = 0, top: str = "") -> spaces.Space:
    """A Box, another leaf, or (up to two levels deep) a Dict or Tuple of 1-3 parts; ``top`` chooses the kind of the
    whole space (cases take turns, so that a few of them cover all four)."""
    kind = top or ("leaf" if depth >= 2 or rng.random() < 0.4 else ("Tuple", "Dict")[rng.integers(2)])
    if kind == "Box":
        return _box(rng, floating=False)
    if kind == "leaf":
        return _leaf(rng)
    parts = [_observation(rng, depth + 1) for _ in range(int(rng.integers(1, 4)))]
    if kind == "Tuple":
        return spaces.Tuple(parts)
    return spaces.Dict({f"part{i}": part for i, part in enumerate(parts)})


def _action(rng: np.random.Generator) -> spaces.Space:
    kind = rng.integers(4)
    if kind == 0:
        return spaces.Discrete(int(rng.integers(1, 5)), start=int(rng.integers(-3, 4)))
    if kind == 1:
        return _box(rng, floating=True)
    if kind == 2:
        nvec = rng.integers(2, 4, size=_shape(rng, int(rng.integers(1, 3))))
        return spaces.MultiDiscrete(nvec, start=rng.integers(-2, 3, size=nvec.shape))
    return spaces.MultiBinary(int(rng.integers(1, 4)) if rng.random() < 0.5 else [2, 3])


# What no policy takes: one of these replaces a space (or a part of one) now and then.
UNSUPPORTED = (
    lambda rng: spaces.Text(4),
    lambda rng: spaces.Sequence(spaces.Discrete(2)),
    lambda rng: spaces.Box(-3, 3, _shape(rng, 1), np.int64),  # as an action: not floating point
    lambda rng: spaces.Dict({"move": spaces.Discrete(2)}),  # as an action: composite
)


def generated_spaces(case: int) -> tuple[spaces.Space, spaces.Space]:
    """The observation and action spaces of case ``case`` (the same on every call and in every process)."""
    rng = np.random.default_rng([SEED, case])
    observation, action = _observation(rng, top=("Box", "Dict", "Tuple", "leaf")[case % 4]), _action(rng)
    if rng.random() < 0.15:  # an unsupported action space
        action = UNSUPPORTED[int(rng.integers(2, 4))](rng)
    elif rng.random() < 0.15:  # an unsupported part of the observation, as deep as it goes
        bad = UNSUPPORTED[int(rng.integers(0, 2))](rng)
        if isinstance(observation, spaces.Dict):
            key = list(observation.spaces)[-1]
            observation = spaces.Dict({**observation.spaces, key: bad})
        elif isinstance(observation, spaces.Tuple):
            observation = spaces.Tuple((*observation.spaces[:-1], bad))
        else:
            observation = spaces.Dict({"fine": observation, "bad": bad})
    return observation, action


def mask_components(space: spaces.Space) -> list[int]:
    """The choices of each component of an action of ``space`` in lit_ppo's flat mask layout (Discrete: one
    component of n; MultiDiscrete: nvec flattened; MultiBinary: a [0, 1] pair per element); [] for a Box."""
    if isinstance(space, spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete):
        return [int(n) for n in space.nvec.flatten()]
    if isinstance(space, spaces.MultiBinary):
        return [2] * int(np.prod(space.shape))
    return []


def random_mask(space: spaces.Space, rng: np.random.Generator) -> np.ndarray:
    """A flat mask with at least one valid choice per component."""
    parts = []
    for n in mask_components(space):
        part = rng.random(n) < 0.5
        part[rng.integers(n)] = True
        parts.append(part)
    return np.concatenate(parts)


def allowed(space: spaces.Space, action: Any, mask: np.ndarray) -> bool:
    """Whether ``action`` (as the env takes it) is valid under ``mask``."""
    choices = np.asarray(action, np.int64).reshape(-1) - np.asarray(getattr(space, "start", 0)).reshape(-1)
    offsets = np.concatenate([[0], np.cumsum(mask_components(space))[:-1]])
    return bool(mask[offsets + choices].all())


def generated_settings(case: int) -> dict[str, Any]:
    """How case ``case`` trains: ``recurrent`` (a GRU core), ``normalize`` (observations and rewards) and
    ``action_masks`` (None, ``method`` or ``info``; only for action spaces that have masks). Drawn from a stream of
    their own, so that the spaces of a case do not depend on them."""
    rng = np.random.default_rng([SEED, case, 1])
    recurrent, normalize, source = rng.random() < 0.25, rng.random() < 0.5, ("method", "info")[rng.integers(2)]
    maskable = bool(mask_components(generated_spaces(case)[1]))
    return {"recurrent": bool(recurrent), "normalize": bool(normalize),
            "action_masks": source if maskable and rng.random() < 0.5 else None}


class GeneratedEnv(gym.Env):
    """Samples of the observation space of case ``case``; an action outside the action space raises, and so does,
    with ``masks``, an action the current mask forbids (``action_masks()`` and ``info["action_mask"]``); episodes
    end at random (terminated) or by the registered time limit (truncated)."""

    def __init__(self, case: int = 0, masks: bool = False) -> None:
        self.observation_space, self.action_space = generated_spaces(case)
        self.masks = masks
        self.mask = np.ones(sum(mask_components(self.action_space)), bool)

    def _info(self) -> dict[str, Any]:
        if not self.masks:
            return {}
        self.mask = random_mask(self.action_space, self.np_random)
        return {"action_mask": self.mask.copy()}

    def action_masks(self) -> np.ndarray:
        return self.mask.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        return self.observation_space.sample(), self._info()

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} outside {self.action_space}")
        if self.masks and not allowed(self.action_space, action, self.mask):
            raise ValueError(f"action {action!r} forbidden by the mask {self.mask.tolist()}")
        terminated = bool(self.np_random.random() < 0.2)
        return self.observation_space.sample(), float(self.np_random.normal()), terminated, False, self._info()


# -- 0-d observations -------------------------------------------------------------------------------------------
class ScalarEnv(gym.Env):
    """Observation: one number in [-1, 1], a 0-d ``Box``. Action 0, 1 or 2, one of them invalid at each step (in
    ``action_masks()`` and ``info["action_mask"]``): an invalid one ends the episode with -1; otherwise the reward is
    1 when the action is 2 and the number positive, or 0 and it negative. Truncated after ``length`` steps (no
    registration needed for a time limit)."""

    def __init__(self, length: int = 6) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(), dtype=np.float32)
        self.action_space = spaces.Discrete(3)
        self.length, self.t = length, 0
        self.mask = np.ones(3, bool)
        self.value = np.float32(0.0)

    def _draw(self) -> tuple[Any, dict[str, Any]]:
        self.value = np.float32(self.np_random.uniform(-1.0, 1.0))
        self.mask = np.ones(3, bool)
        self.mask[self.np_random.integers(3)] = False
        return self._observation(), {"action_mask": self.mask.copy()}

    def _observation(self) -> Any:
        return np.array(self.value, np.float32)

    def action_masks(self) -> np.ndarray:
        return self.mask.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw()

    def step(self, action):
        self.t += 1
        valid = bool(self.mask[int(action)])
        right = (int(action) == 2 and self.value > 0) or (int(action) == 0 and self.value < 0)
        reward = float(right) if valid else -1.0
        obs, info = self._draw()
        return obs, reward, not valid, self.t >= self.length, info


class ScalarDictEnv(ScalarEnv):
    """``ScalarEnv`` whose number is the 0-d ``height`` of a Dict, beside vectors of noise."""

    def __init__(self, length: int = 6) -> None:
        super().__init__(length)
        self.observation_space = spaces.Dict(height=spaces.Box(-1.0, 1.0, shape=(), dtype=np.float32),
                                             orientations=spaces.Box(-1.0, 1.0, (14,), np.float32),
                                             velocity=spaces.Box(-np.inf, np.inf, (9,), np.float32))

    def _observation(self) -> Any:
        return {"height": np.array(self.value, np.float32),
                "orientations": self.np_random.uniform(-1.0, 1.0, 14).astype(np.float32),
                "velocity": self.np_random.normal(size=9).astype(np.float32)}


class ScalarVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` ScalarEnvs in numpy, with next-step autoreset (gymnasium's default, as native vector envs)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, length: int = 6) -> None:
        self.num_envs, self.length = num_envs, length
        self.single_observation_space = spaces.Box(-1.0, 1.0, shape=(), dtype=np.float32)
        self.single_action_space = spaces.Discrete(3)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.t = np.zeros(num_envs, np.int64)
        self.ended = np.zeros(num_envs, bool)
        self.value = np.zeros(num_envs, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t[:], self.ended[:] = 0, False
        self.value = self.np_random.uniform(-1.0, 1.0, self.num_envs).astype(np.float32)
        return self.value.copy(), {}

    def step(self, actions):
        actions = np.asarray(actions)
        reward = (((actions == 2) & (self.value > 0)) | ((actions == 0) & (self.value < 0))).astype(np.float64)
        reward[self.ended] = 0.0  # a reset step: the action is ignored
        self.t = np.where(self.ended, 0, self.t + 1)
        truncated = (self.t >= self.length) & ~self.ended
        self.ended = truncated
        self.value = self.np_random.uniform(-1.0, 1.0, self.num_envs).astype(np.float32)
        return self.value.copy(), reward, np.zeros(self.num_envs, bool), truncated, {}


gym.register("LitPPOTest/Generated-v0", entry_point=GeneratedEnv, max_episode_steps=6)
gym.register("LitPPOTest/Scalar-v0", entry_point=ScalarEnv, vector_entry_point=ScalarVectorEnv)
