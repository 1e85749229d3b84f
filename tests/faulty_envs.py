"""An environment that fails on request, for fault tests run through the CLI in fresh processes.

Importing this module registers ``LitPPOTest/Faulty-v0``; the CLI reaches it as
``tests.faulty_envs:LitPPOTest/Faulty-v0`` (gymnasium imports the module named before the colon).
The fault is chosen by environment variables read at step time, so a run resumed from a checkpoint (whose
pickled environments carry their step counters) can meet a fault the first run did not:
``LIT_PPO_TEST_RAISE_AT=N`` raises at this env instance's N-th step, ``LIT_PPO_TEST_NAN_AT=N`` returns a
NaN reward there, ``LIT_PPO_TEST_NAN_FROM=N`` at every step from the N-th on. ``LIT_PPO_TEST_FAULTY_SEED=S`` arms the fault only in the sub-environment first reset with seed
``S`` (sub-environment ``i`` of rank ``r`` gets ``data.seed + r * num_envs + i``).
"""

import os

import gymnasium as gym
import numpy as np


class FaultyEnv(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.total_steps = 0
        self.first_seed = None

    def reset(self, *, seed=None, options=None):
        if self.first_seed is None:
            self.first_seed = seed
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), {}

    def step(self, action):
        self.total_steps += 1
        armed = os.environ.get("LIT_PPO_TEST_FAULTY_SEED") in (None, str(self.first_seed))
        if armed and self.total_steps == int(os.environ.get("LIT_PPO_TEST_RAISE_AT", -1)):
            raise RuntimeError("simulated simulator crash")
        nan = armed and (self.total_steps == int(os.environ.get("LIT_PPO_TEST_NAN_AT", -1))
                         or 0 < int(os.environ.get("LIT_PPO_TEST_NAN_FROM", 0)) <= self.total_steps)
        reward = float("nan") if nan else float(action)
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), reward, False, False, {}


gym.register("LitPPOTest/Faulty-v0", entry_point=FaultyEnv, max_episode_steps=20)
