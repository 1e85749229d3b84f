"""Same-step and next-step autoreset give the same PPO data on the real transitions, checked against values
computed by hand; a next-step reset step has weight 0 everywhere it could count."""

import gymnasium as gym
import pytest
import torch
from gymnasium.vector import AutoresetMode

from lit_ppo.learning.losses import normalize_advantages, ppo_loss_terms
from lit_ppo.collection.collector import RolloutCollector
from tests.vector_envs import counters

GAMMA, LAMBDA = 0.5, 1.0  # lambda 1: advantages are discounted returns minus values, easy to write down


class CountingValuePolicy:
    """Always action 0 (log-prob 0), and V(s) = s / 10 for the counter's observation s = steps so far."""

    def act(self, obs, generator=None, deterministic=False):
        return torch.zeros(obs.shape[0], dtype=torch.long), torch.zeros(obs.shape[0]), obs[:, 0] / 10, None

    def value(self, obs):
        return obs[:, 0] / 10


def collect(mode: AutoresetMode, num_steps: int) -> dict:
    envs = gym.wrappers.vector.RecordEpisodeStatistics(counters(2, mode.value))
    collector = RolloutCollector(envs, num_steps, GAMMA, LAMBDA, seed=0, generator=torch.Generator().manual_seed(0))
    data = collector.collect(CountingValuePolicy())
    collector.close()
    return data


# By hand, per episode of 3 steps (observations 0, 1, 2; reward 1 each; V(s) = s / 10; gamma 0.5, lambda 1):
# terminated at the 3rd step: G = 1.75, 1.5, 1; minus V = 0, .1, .2
TERMINATED = [1.75, 1.4, 0.8]
# truncated at the 3rd step, bootstrapped from V(final observation 3) = 0.3: G = 1.7875, 1.575, 1.15
TRUNCATED = [1.7875, 1.475, 0.95]


def per_env(flat: torch.Tensor, num_steps: int) -> torch.Tensor:
    return flat.view(num_steps, 2).T  # samples are step-major: [T * N] -> [N, T]


def test_same_step_rollout_matches_the_hand_computed_advantages():
    data = collect(AutoresetMode.SAME_STEP, 6)  # two whole episodes per env
    advantages = per_env(data["advantages"], 6)
    torch.testing.assert_close(advantages[0], torch.tensor(TERMINATED * 2))
    torch.testing.assert_close(advantages[1], torch.tensor(TRUNCATED * 2))
    assert data["weights"].numel() == 0  # every sample is real: no weighting at all
    assert data["episode_returns"].tolist() == [3.0] * 4 and data["episode_lengths"].tolist() == [3.0] * 4


def test_next_step_rollout_gives_the_same_real_transitions_and_weight_0_to_reset_steps():
    data = collect(AutoresetMode.NEXT_STEP, 8)  # per episode: 3 real steps, then the reset step
    weights = per_env(data["weights"], 8)
    torch.testing.assert_close(weights, torch.tensor([[1.0, 1, 1, 0, 1, 1, 1, 0]] * 2))
    advantages, returns, values = (per_env(data[k], 8) for k in ("advantages", "returns", "values"))
    real = weights > 0
    same = collect(AutoresetMode.SAME_STEP, 6)
    torch.testing.assert_close(advantages[real].view(2, 6), per_env(same["advantages"], 6))
    torch.testing.assert_close(returns[real].view(2, 6), per_env(same["returns"], 6))
    torch.testing.assert_close(advantages[0][real[0]], torch.tensor(TERMINATED * 2))
    torch.testing.assert_close(advantages[1][real[1]], torch.tensor(TRUNCATED * 2))
    # the reset step acted on the final observation (3): its value is what bootstrapped the truncation
    torch.testing.assert_close(values[1][~real[1]], torch.tensor([0.3, 0.3]))
    # episodes are counted once, with their real lengths
    assert data["episode_returns"].tolist() == [3.0] * 4 and data["episode_lengths"].tolist() == [3.0] * 4


def test_a_reset_step_counts_nowhere_in_the_loss_or_the_advantage_normalization():
    advantages = torch.tensor([1.0, 2.0, 3.0, 100.0])
    weights = torch.tensor([1.0, 1.0, 1.0, 0.0])
    # normalized over the three real samples: mean 2, std 1
    torch.testing.assert_close(normalize_advantages(advantages, weights)[:3], torch.tensor([-1.0, 0.0, 1.0]))
    new_logprob = torch.tensor([0.0, 0.0, 0.0, 5.0])  # the reset step's ratio is far out of the clip range
    common = dict(old_logprob=torch.zeros(4), entropy=torch.tensor([1.0, 1.0, 1.0, 9.0]),
                  new_values=torch.tensor([0.0, 0.0, 0.0, 50.0]), old_values=torch.zeros(4),
                  returns=torch.tensor([1.0, 1.0, 1.0, -50.0]), clip_coef=0.2)
    weighted = ppo_loss_terms(new_logprob, advantages=advantages, weights=weights, **common)
    real = ppo_loss_terms(new_logprob[:3], advantages=advantages[:3],
                          **{k: v[:3] if torch.is_tensor(v) else v for k, v in common.items()})
    for name, got, expected in zip(weighted._fields, weighted, real):
        torch.testing.assert_close(got, expected, msg=name)
    # by hand on the real samples: ratio 1 -> surrogate -mean(A) = -2; value 0.5 * mean((0 - 1)^2) = 0.5
    assert weighted.policy.item() == pytest.approx(-2.0) and weighted.value.item() == pytest.approx(0.5)
    assert weighted.entropy.item() == pytest.approx(1.0) and weighted.clip_fraction.item() == 0.0


class ScaleRecorder(CountingValuePolicy):
    """CountingValuePolicy that records the returns a rollout gives its reward scaling (and leaves rewards as they
    are)."""

    def __init__(self):
        self.returns = []

    def scale_rewards(self, rewards, returns=None):
        self.returns.append(returns.clone())
        return rewards


def test_the_first_rollouts_reward_scale_comes_from_the_real_transitions_only():
    # Per episode: rewards 1, 1, 1 (gamma 0.5: running returns 1, 1.5, 1.75), then the reset step (reward 0,
    # running return 0), which is no transition of any episode.
    envs = gym.wrappers.vector.RecordEpisodeStatistics(counters(2, AutoresetMode.NEXT_STEP.value))
    collector = RolloutCollector(envs, 8, GAMMA, LAMBDA, seed=0, generator=torch.Generator().manual_seed(0),
                                 normalize_reward=True)
    policy = ScaleRecorder()
    data = collector.collect(policy)
    collector.close()
    [returns] = policy.returns
    torch.testing.assert_close(returns, torch.tensor([1.0, 1.0, 1.5, 1.5, 1.75, 1.75] * 2))  # step-major, 2 envs
    torch.testing.assert_close(data["reward_returns"], returns)


def test_observation_statistics_are_over_the_real_transitions_only(tmp_path):
    # Next-step autoreset: each counter's inputs are 0, 1, 2, then 3 at the reset step (the final observation),
    # so 8 steps give 0, 1, 2, 3, 0, 1, 2, 3 per env. The real transitions' observations 0, 1, 2, 0, 1, 2 have
    # mean 1 and (population) variance 2/3; with the reset steps they would be 1.5 and 1.25.
    import lightning as L

    from lit_ppo import PPODataModule, PPOModule

    dm = PPODataModule("LitPPOTest/Counter-v0", vectorization="tests.vector_envs.counters", num_envs=2,
                       num_steps=8, total_timesteps=16, minibatch_size=16, update_epochs=1, normalize_obs=True,
                       normalize_reward=False, eval_episodes=2, seed=0)
    model = PPOModule(env_spec=dm.env_spec, hidden_sizes=[8])
    L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, default_root_dir=tmp_path).fit(model, dm)
    rms = model.policy.encoder.obs_rms
    assert rms.count.item() == 12
    assert rms.mean.item() == pytest.approx(1.0, abs=1e-12)
    assert rms.var.item() == pytest.approx(2 / 3, abs=1e-12)
