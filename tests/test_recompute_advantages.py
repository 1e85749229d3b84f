"""``data.recompute_advantages``: the rollout carries its rewards, ends and bootstrap observations, from which the
learner recomputes GAE with the current critic before every pass after the first. Checked against values written
down by hand (the counters of ``tests/vector_envs.py``: observation = steps so far, reward 1 per step, episodes of 3
steps, env 0 terminating and env 1 truncated), in both autoreset modes, and in fits."""

import gymnasium as gym
import lightning as L
import pytest
import torch
from gymnasium.vector import AutoresetMode

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.collection.collector import RolloutCollector
from lit_ppo.collection.gae import recompute_gae
from lit_ppo.collection.rollout import Rollout
from lit_ppo.errors import ConfigError
from tests.test_autoreset import GAMMA, LAMBDA, TERMINATED, TRUNCATED, CountingValuePolicy, per_env
from tests.vector_envs import counters


def rollout(mode: AutoresetMode, num_steps: int) -> Rollout:
    envs = gym.wrappers.vector.RecordEpisodeStatistics(counters(2, mode.value))
    collector = RolloutCollector(envs, num_steps, GAMMA, LAMBDA, seed=0, generator=torch.Generator().manual_seed(0),
                                 keep_trace=True)
    data = collector.collect(CountingValuePolicy())
    collector.close()
    return Rollout(**data, minibatch_indices=torch.arange(2 * num_steps).view(1, 1, -1))


def values_of(r: Rollout, value) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return value(r.obs), value(r.next_obs), value(r.final_obs)


@pytest.mark.parametrize("mode,steps", [(AutoresetMode.SAME_STEP, 6), (AutoresetMode.NEXT_STEP, 8)])
def test_the_acting_values_give_back_the_rollouts_own_advantages(mode, steps):
    r = rollout(mode, steps)
    assert r.has_trace and (r.gamma, r.gae_lambda) == (GAMMA, LAMBDA)
    advantages, returns = recompute_gae(r, *values_of(r, CountingValuePolicy().value))
    assert torch.equal(advantages, r.advantages) and torch.equal(returns, r.returns)


def test_same_step_other_values_give_the_hand_computed_advantages():
    # V'(s) = s / 5. Terminated: G = 1.75, 1.5, 1 minus V' = 0, .2, .4. Truncated, bootstrapped from the final
    # observation's V'(3) = .6: G = 1.825, 1.65, 1.3 minus 0, .2, .4.
    r = rollout(AutoresetMode.SAME_STEP, 6)
    assert r.final_index.tolist() == [2 * 2 + 1, 5 * 2 + 1]  # env 1's two truncations, at steps 2 and 5
    assert r.final_obs[:, 0].tolist() == [3.0, 3.0] and r.next_obs[:, 0].tolist() == [0.0, 0.0]
    advantages, returns = recompute_gae(r, *values_of(r, lambda obs: obs[:, 0] / 5))
    torch.testing.assert_close(per_env(advantages, 6), torch.tensor([[1.75, 1.3, 0.6] * 2, [1.825, 1.45, 0.9] * 2]))
    torch.testing.assert_close(returns, advantages + r.obs[:, 0] / 5)
    # and the acting values' own, by hand (tests/test_autoreset.py)
    acting, _ = recompute_gae(r, *values_of(r, lambda obs: obs[:, 0] / 10))
    torch.testing.assert_close(per_env(acting, 6), torch.tensor([TERMINATED * 2, TRUNCATED * 2]))


def test_next_step_other_values_give_the_hand_computed_advantages_on_the_real_transitions():
    # Next-step: the truncated episode's final observation is the reset step's input, so no final_obs is kept.
    r = rollout(AutoresetMode.NEXT_STEP, 8)
    assert r.final_obs.shape[0] == 0 and r.final_index.numel() == 0
    advantages, _ = recompute_gae(r, *values_of(r, lambda obs: obs[:, 0] / 5))
    real = per_env(r.weights, 8) > 0
    torch.testing.assert_close(per_env(advantages, 8)[real].view(2, 6),
                               torch.tensor([[1.75, 1.3, 0.6] * 2, [1.825, 1.45, 0.9] * 2]))


def fit(tmp_path, recompute: bool, update_epochs: int, **data) -> dict:
    L.seed_everything(0)
    dm = PPODataModule("Pendulum-v1", num_envs=2, num_steps=64, total_timesteps=256, minibatch_size=32,
                       update_epochs=update_epochs, eval_episodes=1, seed=0, env_kwargs={"max_episode_steps": 50},
                       recompute_advantages=recompute, **data)
    model = PPOModule(env_spec=dm.env_spec, hidden_sizes=[16])
    L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, limit_val_batches=0, default_root_dir=tmp_path).fit(model, dm)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_one_epoch_learns_the_same_and_more_epochs_learn_from_fresher_advantages(tmp_path):
    # The first pass always uses the collector's advantages: with one pass the option changes nothing.
    one_off, one_on = fit(tmp_path, False, 1), fit(tmp_path, True, 1)
    assert all(torch.equal(one_off[k], one_on[k]) for k in one_off)
    two_off, two_on = fit(tmp_path, False, 2), fit(tmp_path, True, 2)
    assert any(not torch.equal(two_off[k], two_on[k]) for k in two_off)
    assert all(torch.isfinite(v).all() for v in two_on.values() if v.is_floating_point())


def test_the_trace_crosses_to_the_learner_from_an_overlapped_collector(tmp_path):
    assert fit(tmp_path, True, 2, overlap=True)  # the trace's fields go through the collector process's transport


def test_a_recurrent_policy_is_refused_with_the_key_and_the_fix(tmp_path):
    dm = PPODataModule("CartPole-v1", num_envs=2, num_steps=8, total_timesteps=32, minibatch_size=8,
                       recompute_advantages=True, seed=0)
    model = PPOModule(env_spec=dm.env_spec, recurrent={"hidden_size": 8})
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    with pytest.raises(ConfigError, match="data.recompute_advantages: not available with a recurrent policy.*false"):
        trainer.fit(model, dm)
