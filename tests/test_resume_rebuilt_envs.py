"""Resuming with environments that pickle as their constructor arguments (gymnasium's ``EzPickle``: Box2D, MuJoCo).

Unpickled, such an environment is a new one without the episode it was in: LunarLander's ``step`` then failed an
assertion at the first step after ``--ckpt_path last``. The collector saves them as unpicklable instead, so a
resume resets them with a seed derived from (seed, rank, iteration) and says so."""

import gymnasium as gym
import numpy as np
import torch

from lit_ppo.envs.make import make_vector_env, rebuilt_by_pickling
from lit_ppo.collection.collector import RolloutCollector
from tests.test_rollout import ValueIsObservation


class Rebuilt(gym.Env, gym.utils.EzPickle):
    """Like Box2D's envs: pickles as its constructor arguments and cannot step before a reset."""

    observation_space = gym.spaces.Box(0.0, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        gym.utils.EzPickle.__init__(self)
        self.t = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        assert self.t is not None, "step before reset"
        self.t += 1
        return np.array([float(self.t)], np.float32), 1.0, False, False, {}


gym.register("LitPPOTest/Rebuilt-v0", entry_point=Rebuilt, max_episode_steps=5)


def collector():
    envs = make_vector_env("LitPPOTest/Rebuilt-v0", 2)
    return RolloutCollector(envs, 2, 0.9, 0.9, seed=0, generator=torch.Generator().manual_seed(0))


def test_ezpickle_envs_are_not_saved_and_a_resume_resets_them_with_a_note():
    first = collector()
    first.collect(ValueIsObservation())  # observations 0, 1: mid-episode
    assert "Rebuilt pickles as its constructor arguments (gymnasium's EzPickle)" in rebuilt_by_pickling(first.envs)
    state = first.state_dict()
    assert state["envs"] is None and "EzPickle" in state["envs_error"]
    restored = collector()
    note = restored.load_state_dict(state)
    assert "could not be saved" in note and "EzPickle" in note and "episodes in progress at the checkpoint restart" in note
    data = restored.collect(ValueIsObservation())  # steps where the unpickled env would have failed
    assert data["obs"][:, 0].tolist() == [0.0, 0.0, 1.0, 1.0] and restored.iterations == 2


def test_plainly_pickled_envs_are_still_saved():
    assert rebuilt_by_pickling(make_vector_env("LitPPOTest/Counter-v0", 2)) is None
