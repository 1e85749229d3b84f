"""An environment with invalid actions, for the action-mask tests; importing it registers
``LitPPOTest/InvalidActions-v0`` (reach it as ``tests.masked_envs:LitPPOTest/InvalidActions-v0``).

``Discrete(4)``: at every step two of the four actions are valid, drawn by the environment; the observation shows
which (four 0/1 floats), so a policy can also learn them without masks. A valid action pays 1, an invalid one ends
the episode with -10. Episodes last at most 20 steps. Masks come both ways: ``action_masks()`` and
``info["action_mask"]``. ``bad_mask_at=N`` with ``bad="empty"`` or ``bad="shape"`` gives a mask with no valid action,
or of the wrong size, at the environment's N-th step. ``INVALID_TAKEN`` counts invalid actions taken in this process.
"""

import gymnasium as gym
import numpy as np

INVALID_TAKEN = [0]


class InvalidActionsEnv(gym.Env):
    observation_space = gym.spaces.Box(0.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(4)

    def __init__(self, bad_mask_at: int = -1, bad: str = "empty"):
        self.bad_mask_at, self.bad, self.steps = bad_mask_at, bad, 0
        self.mask = np.ones(4, dtype=bool)

    def _draw(self):
        self.mask = np.zeros(4, dtype=bool)
        self.mask[self.np_random.choice(4, size=2, replace=False)] = True
        if self.steps == self.bad_mask_at:
            self.mask = np.zeros(4, dtype=bool) if self.bad == "empty" else np.ones(3, dtype=bool)
        return self.mask.astype(np.float32)[:4].copy() if self.mask.size == 4 else np.ones(4, np.float32)

    def action_masks(self):
        return self.mask.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        obs = self._draw()
        return obs, {"action_mask": self.mask.copy()}

    def step(self, action):
        self.steps += 1
        valid = bool(self.mask[int(action)]) if self.mask.size == 4 else True
        if not valid:
            INVALID_TAKEN[0] += 1
        obs = self._draw()
        return obs, 1.0 if valid else -10.0, not valid, False, {"action_mask": self.mask.copy()}


gym.register("LitPPOTest/InvalidActions-v0", entry_point=InvalidActionsEnv, max_episode_steps=20)
