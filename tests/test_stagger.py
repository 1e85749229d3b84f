"""``data.stagger_episodes``: each environment's first episode is cut short by its share of the time limit, later
episodes run whole, the cut is a truncation; on by default where the vectorization takes a wrapper per environment,
and refused, when asked for, where it does not."""

import numpy as np
import pytest

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.envs.make import make_vector_env
from lit_ppo.envs.stagger import first_episode_limit, staggered
from lit_ppo.errors import ConfigError


def test_first_episodes_are_spread_over_one_time_limit_across_all_ranks():
    assert [first_episode_limit(200, i, 4) for i in range(4)] == [200, 150, 100, 50]
    # rank 1 of 2, 4 envs each: environments 4-7 of 8
    assert [first_episode_limit(1000, i, 8) for i in range(4, 8)] == [500, 375, 250, 125]
    assert first_episode_limit(None, 0, 2) is None  # no time limit: nothing to stagger by


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_each_environment_ends_its_first_episode_early_by_its_share_then_runs_whole_episodes(vectorization):
    envs = make_vector_env("Pendulum-v1", 4, vectorization, stagger=(0, 4))  # Pendulum: 200 steps, never terminates
    envs.reset(seed=0)
    ends = {i: [] for i in range(4)}
    for t in range(1, 451):
        _, _, terminated, truncated, _ = envs.step(envs.action_space.sample())
        assert not terminated.any()
        for i in np.flatnonzero(truncated):
            ends[i].append(t)
    envs.close()
    assert ends == {0: [200, 400], 1: [150, 350], 2: [100, 300], 3: [50, 250, 450]}


def test_a_rollout_holds_the_short_first_episodes_by_default_and_whole_ones_without():
    def lengths(stagger) -> list:
        dm = PPODataModule("Pendulum-v1", num_envs=4, num_steps=256, minibatch_size=256, seed=0,
                           stagger_episodes=stagger)
        dm.set_policy(PPOModule(env_spec=dm.env_spec).policy)
        dataset = dm.build_rollout_dataset(dm.placement)
        rollout = next(iter(dataset))
        dataset.close()
        return sorted(rollout.episode_lengths.tolist())

    assert lengths(False) == [200.0] * 4
    assert lengths(None) == lengths(True) == [50.0, 100.0, 150.0, 200.0, 200.0]  # env 3's 2nd episode ends at step 250


def test_a_vectorization_without_per_environment_wrappers_is_refused_when_asked_and_left_unstaggered_by_default():
    with pytest.raises(ConfigError, match=r"data.stagger_episodes.*'native'.*sync or async"):
        PPODataModule("CartPole-v1", vectorization="native", stagger_episodes=True)
    factory = {"class_path": "my_envs.make", "init_args": {"threads": 4}}  # named by its class path, as make.py does
    with pytest.raises(ConfigError, match=r"data.vectorization 'my_envs.make' does not take"):
        PPODataModule("CartPole-v1", vectorization=factory, stagger_episodes=True)
    assert not staggered(None, "native") and staggered(None, "sync") and staggered(None, "async")
    assert not staggered(False, "sync")
