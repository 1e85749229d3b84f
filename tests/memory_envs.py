"""A memory task for recurrent policies: a cue shown only at the first step must be recalled at the last."""

import gymnasium as gym
import numpy as np


class CueRecall(gym.Env):
    """``length`` steps per episode. Observation ``[cue, last]``: ``cue`` is -1 or +1 at the first step and 0
    afterwards, ``last`` is 1 at the final step. Reward only at the final step: +1 for the action matching the cue
    (1 for +1, 0 for -1), -1 otherwise. A feed-forward policy sees ``[0, 1]`` at every final step whatever the cue,
    so its best expected return is 0; a policy that remembers the cue gets 1."""

    def __init__(self, length: int = 4) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t, self._cue = 0, 1

    def _obs(self) -> np.ndarray:
        return np.array([self._cue if self._t == 0 else 0.0, float(self._t == self.length - 1)], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t, self._cue = 0, int(self.np_random.choice([-1, 1]))
        return self._obs(), {}

    def step(self, action):
        last = self._t == self.length - 1
        reward = (1.0 if int(action) == (self._cue > 0) else -1.0) if last else 0.0
        self._t += 1
        return (self._obs() if not last else np.zeros(2, np.float32)), reward, last, False, {}
