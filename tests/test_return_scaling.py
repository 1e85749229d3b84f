"""``data.return_scaling`` (Tianshou's MuJoCo recipe): the critic's values are in units of the running std of the
GAE returns, GAE runs on the raw rewards with the values multiplied back, and the critic's targets are the returns
divided by that std. Checked against the hand-computed counters of ``tests/test_autoreset.py``, then in a fit."""

import gymnasium as gym
import lightning as L
import pytest
import torch
from gymnasium.vector import AutoresetMode

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.collection.collector import RolloutCollector
from lit_ppo.envs.spaces import BoxSpec, DiscreteSpec
from lit_ppo.errors import ConfigError
from lit_ppo.networks.actor_critic import ActorCritic
from tests.test_autoreset import GAMMA, LAMBDA, TERMINATED, TRUNCATED, CountingValuePolicy, per_env
from tests.vector_envs import counters


class ScaledValuePolicy(CountingValuePolicy):
    """The counters' V(s) = s / 10 in raw units, given as s / 20 with a value scale of 2."""

    def act(self, obs, generator=None, deterministic=False):
        action, logprob, value, state = super().act(obs)
        return action, logprob, value / 2, state

    def value(self, obs):
        return super().value(obs) / 2

    def value_scale(self):
        return torch.tensor(2.0)


@pytest.mark.parametrize("mode,steps", [(AutoresetMode.SAME_STEP, 6), (AutoresetMode.NEXT_STEP, 8)])
def test_advantages_are_raw_and_the_critics_targets_are_the_returns_over_the_scale(mode, steps):
    envs = gym.wrappers.vector.RecordEpisodeStatistics(counters(2, mode.value))
    collector = RolloutCollector(envs, steps, GAMMA, LAMBDA, seed=0, generator=torch.Generator().manual_seed(0),
                                 return_scaling=True)
    data = collector.collect(ScaledValuePolicy())
    collector.close()
    real = data["weights"] > 0 if data["weights"].numel() else torch.ones(2 * steps, dtype=torch.bool)
    advantages = per_env(data["advantages"], steps)[per_env(real, steps)].view(2, 6)
    # the same advantages as the unscaled V(s) = s / 10 gives (hand-computed there)
    torch.testing.assert_close(advantages, torch.tensor([TERMINATED * 2, TRUNCATED * 2]))
    raw_values = data["obs"][:, 0] / 10
    raw_returns = data["advantages"] + raw_values
    torch.testing.assert_close(data["values"], raw_values / 2)  # what the critic said, in its own units
    torch.testing.assert_close(data["returns"], raw_returns / 2)  # what it learns, in the same units
    # the statistic the learner merges after its updates: the raw returns of the real transitions
    torch.testing.assert_close(data["reward_returns"], raw_returns[real])
    # terminated episode: G = 1.75, 1.5, 1 (raw) whatever the scale
    torch.testing.assert_close(per_env(raw_returns, steps)[0][:3], torch.tensor([1.75, 1.5, 1.0]))


def test_a_rollout_acted_in_an_older_scale_is_rescaled_to_the_learners():
    from lit_ppo.collection.rollout import Rollout
    from lit_ppo.learning.decoupled import in_learner_units

    policy = ActorCritic(BoxSpec((1,)), DiscreteSpec(2), [4], return_scaling=True)
    policy.update_normalization(torch.zeros(4, 1), torch.tensor([0.0, 8.0, 0.0, 8.0]))  # var 16: the learner's std 4
    t = torch.tensor
    rollout = Rollout(obs=torch.zeros(2, 1), actions=t([0, 1]), logprobs=t([-0.7, -0.7]), values=t([1.0, 2.0]),
                      advantages=t([1.0, 1.0]), returns=t([3.0, 4.0]), minibatch_indices=t([[[0, 1]]]),
                      reward_returns=t([6.0, 8.0]), episode_returns=t([]), episode_lengths=t([]), value_scale=2.0,
                      policy_lag=1)
    rescaled = in_learner_units(policy, rollout)  # in units of 2 when acted: half as many units of 4
    torch.testing.assert_close(rescaled.values, t([0.5, 1.0]))
    torch.testing.assert_close(rescaled.returns, t([1.5, 2.0]))
    assert rescaled.value_scale == pytest.approx(4.0) and torch.equal(rescaled.advantages, rollout.advantages)
    assert in_learner_units(policy, rescaled) is rescaled  # the learner's own units: unchanged


def test_overlapped_returns_do_not_feed_back_into_the_scale(no_child_left):
    # Pendulum's discounted returns are above -16.3 / (1 - 0.99) = -1,627 (GAE's bootstrapped ones overshoot early,
    # synchronously too). Overlapped, before a lagged rollout's advantages came from the learner's critic, the acting
    # critic's values, multiplied by a std that its own returns had just inflated, fed back: over these 10 rollouts the
    # running mean of the returns the std merged reached -7,602 (now -1,995); a single rollout's, -129,700 by the 12th.
    means = []

    class Returns(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            means.append(float(pl_module.policy.return_rms.mean))  # what the std merged: the learner's returns

    L.seed_everything(1)
    data = PPODataModule("Pendulum-v1", total_timesteps=2048 * 10, overlap=True)
    model = PPOModule(env_spec=data.env_spec, target_kl=None)
    L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, callbacks=[Returns()]).fit(model, data)
    assert len(means) == 10 and min(means) > -5_000, means


def test_the_value_scale_is_1_until_statistics_exist_and_rewards_stay_raw():
    policy = ActorCritic(BoxSpec((1,)), DiscreteSpec(2), [4], return_scaling=True)
    assert policy.value_scale().item() == pytest.approx(1.0)
    policy.update_normalization(torch.zeros(4, 1), torch.tensor([0.0, 4.0, 0.0, 4.0]))  # var 4
    assert policy.value_scale().item() == pytest.approx(2.0)
    rewards = torch.tensor([1.0, -2.0, 100.0])
    assert torch.equal(policy.scale_rewards(rewards, rewards), rewards)  # not scaled, not clipped
    assert ActorCritic(BoxSpec((1,)), DiscreteSpec(2), [4]).value_scale().item() == 1.0  # off: always 1


def test_return_scaling_with_reward_normalization_is_refused_naming_both_keys():
    with pytest.raises(ConfigError, match=r"data.return_scaling.*data.normalize_reward: false"):
        PPODataModule("CartPole-v1", normalize_reward=True, return_scaling=True)
    with pytest.raises(ConfigError, match="normalize_reward and data.return_scaling"):
        ActorCritic(BoxSpec((1,)), DiscreteSpec(2), [4], normalize_reward=True, return_scaling=True)


def test_by_default_the_critics_targets_are_scaled_and_a_config_setting_normalize_reward_keeps_its_meaning():
    # (normalize_reward, return_scaling) as given -> as they apply; the configs written before 2026-12-06 all set
    # normalize_reward and none return_scaling, so they train as they did
    cases = {(None, None): (False, True), (True, None): (True, False), (False, None): (False, False),
             (None, True): (False, True), (None, False): (False, False), (False, True): (False, True),
             (True, False): (True, False)}
    for (normalize_reward, return_scaling), expected in cases.items():
        spec = PPODataModule("Pendulum-v1", normalize_reward=normalize_reward, return_scaling=return_scaling).env_spec
        assert (spec["normalize_reward"], spec["return_scaling"]) == expected, (normalize_reward, return_scaling)
        policy = PPOModule(env_spec=spec).policy
        assert policy.return_scaling == expected[1] and (policy.return_rms is not None) == any(expected)
    assert PPODataModule("Pendulum-v1").hparams["normalize_reward"] is None  # saved as given, resolved on use


@pytest.mark.parametrize("recompute", [False, True])
def test_a_fit_merges_the_gae_returns_and_a_checkpoint_keeps_the_scale(tmp_path, recompute):
    dm = PPODataModule("CartPole-v1", num_envs=2, num_steps=32, total_timesteps=128, minibatch_size=32,
                       update_epochs=2, normalize_reward=False, return_scaling=True, eval_episodes=2, seed=0,
                       recompute_advantages=recompute)
    model = PPOModule(env_spec=dm.env_spec, hidden_sizes=[8])
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, callbacks=[L.pytorch.callbacks.ModelCheckpoint(tmp_path)])
    trainer.fit(model, dm)
    rms = model.policy.return_rms
    assert rms.count.item() == 128  # every sample of the 2 rollouts, once
    assert 1.0 < model.policy.value_scale().item() < 100.0  # CartPole's returns: +1 a step, gamma 0.99
    [path] = tmp_path.glob("*.ckpt")
    reloaded = PPOModule.load_from_checkpoint(path)
    assert reloaded.policy.return_scaling and reloaded.policy.value_scale() == model.policy.value_scale()
