"""Gymnasium wrappers lit_ppo ships for its configs (name them in ``data.wrappers``)."""

from collections.abc import Sequence

import gymnasium as gym
import numpy as np


class KeepObservationIndices(gym.ObservationWrapper):
    """Keeps only the entries ``indices`` of a flat ``Box`` observation. With CartPole's ``[0, 2]`` (cart position
    and pole angle, no velocities) the task becomes partially observable, as RL-Zoo's ``CartPoleNoVel-v1``: a
    policy must infer the velocities from what it saw before (``configs/cartpole_pomdp.yaml``)."""

    def __init__(self, env: gym.Env, indices: Sequence[int]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"KeepObservationIndices: needs a flat Box observation space, got {space}.")
        self.indices = np.asarray(list(indices), dtype=np.int64)
        if self.indices.size == 0 or self.indices.min() < 0 or self.indices.max() >= space.shape[0]:
            raise ValueError(f"KeepObservationIndices: indices {list(indices)} must be non-empty and within the "
                             f"observation's {space.shape[0]} entries (0 to {space.shape[0] - 1}).")
        self.observation_space = gym.spaces.Box(space.low[self.indices], space.high[self.indices], dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.indices]
