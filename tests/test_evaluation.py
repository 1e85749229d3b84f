"""Deterministic evaluation on the environment's native vector env (CartPole's ``CartPoleVectorEnv``) where it has
one, and on the sync vector env otherwise: which one is chosen, and that both play the same episodes."""

import gymnasium as gym
import lightning as L
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.envs.make import make_env, make_evaluation_env, make_vector_env
from lit_ppo.collection.evaluation import evaluate_policy


class ConstantPolicy:
    """Always pushes the cart one way: CartPole falls over in ~8-10 steps."""

    def __init__(self, action):
        self.action = action

    def act(self, obs, deterministic=False, state=None):
        zeros = torch.zeros(len(obs))
        return torch.full((len(obs),), self.action, dtype=torch.int64), zeros, zeros, None

    def initial_state(self, n):  # feed-forward: no recurrent state
        return None


class Balancer:
    """A hand-written linear controller that keeps CartPole's pole up for the whole 500 steps."""

    initial_state = ConstantPolicy.initial_state

    def act(self, obs, deterministic=False, state=None):
        push_right = obs[:, 2] + 0.5 * obs[:, 3] + 0.05 * obs[:, 0] + 0.1 * obs[:, 1] > 0
        zeros = torch.zeros(len(obs))
        return push_right.long(), zeros, zeros, None


def _both_paths(episodes, env_kwargs=None):
    return {"sync": make_vector_env("CartPole-v1", episodes, "sync", env_kwargs),
            "native": make_evaluation_env("CartPole-v1", episodes, env_kwargs)}


def test_native_vector_env_only_for_a_plain_registered_id_without_wrappers():
    envs = make_evaluation_env("CartPole-v1", 3)
    assert isinstance(envs.unwrapped, CartPoleVectorEnv) and envs.num_envs == 3
    # Spaces as the policy was built from (lit_ppo.envs.make converts observations and actions by them).
    single = make_env("CartPole-v1")
    assert envs.single_observation_space == single.observation_space
    assert envs.single_action_space == single.action_space

    assert gym.spec("Pendulum-v1").vector_entry_point is None
    assert isinstance(make_evaluation_env("Pendulum-v1", 2).unwrapped, gym.vector.SyncVectorEnv)
    sync_cartpoles = [
        make_evaluation_env("CartPole-v1", 2, wrappers=["gymnasium.wrappers.RecordEpisodeStatistics"]),
        make_evaluation_env("gymnasium.envs.classic_control.cartpole:CartPoleEnv", 2),  # an entry point
        make_evaluation_env("CartPole-v1", 2, {"max_episode_steps": -1}),  # gym.make's "no time limit"
        make_evaluation_env("CartPole-v1", 2, {"disable_env_checker": True}),  # a gym.make-only keyword
    ]
    for envs in sync_cartpoles:
        assert isinstance(envs.unwrapped, gym.vector.SyncVectorEnv)
        assert evaluate_policy(ConstantPolicy(0), envs, 2, seed=0)[1].min() >= 1


def test_both_paths_play_episodes_of_the_same_length():
    for action in (0, 1):
        for name, envs in _both_paths(20).items():
            returns, lengths = evaluate_policy(ConstantPolicy(action), envs, 20, seed=3)
            assert torch.equal(returns, lengths.float()), name  # reward 1 per step
            assert 7 <= lengths.min() and lengths.max() <= 12 and 8 <= lengths.float().mean() <= 11, (name, lengths)


@pytest.mark.parametrize("env_kwargs,cap", [(None, 500), ({"max_episode_steps": 20}, 20),
                                            ({"max_episode_steps": None}, 500)])
def test_episodes_are_truncated_at_max_episode_steps_on_both_paths(env_kwargs, cap):
    for name, envs in _both_paths(4, env_kwargs).items():
        returns, lengths = evaluate_policy(Balancer(), envs, 4, seed=0)
        assert lengths.tolist() == [cap] * 4 and returns.tolist() == [cap] * 4, name


def test_the_data_module_evaluates_on_the_native_env(tmp_path):
    dm = PPODataModule("CartPole-v1", num_envs=2, num_steps=16, minibatch_size=16, eval_episodes=5, seed=0)
    model = PPOModule(env_spec=dm.env_spec, hidden_sizes=[16])
    dm.set_policy(model.policy)  # what PPOModule.setup does; the loaders need a policy to act with
    envs = dm._evaluation_loader().dataset.make_envs()
    assert isinstance(envs.unwrapped, CartPoleVectorEnv) and envs.num_envs == 5
    envs.close()
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    (batch,) = trainer.predict(model, dm)
    assert batch["returns"].shape == batch["lengths"].shape == (5,)
    assert torch.equal(batch["returns"], batch["lengths"].float()) and np.all(batch["lengths"].numpy() >= 1)
    (metrics,) = trainer.validate(model, dm, verbose=False)
    assert metrics["eval/return_mean"] == pytest.approx(batch["returns"].mean().item())
