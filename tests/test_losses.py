import math

import pytest
import torch

from lit_ppo.collection.gae import explained_variance
from lit_ppo.learning.losses import normalize_advantages, ppo_loss_terms


def _terms(**overrides):
    ratios = torch.tensor([0.5, 1.0, 1.5])
    kwargs = dict(
        new_logprob=ratios.log() - 1.0,
        old_logprob=torch.full((3,), -1.0),
        advantages=torch.tensor([1.0, -1.0, 2.0]),
        entropy=torch.tensor([0.3, 0.6, 0.9]),
        new_values=torch.tensor([1.0, 2.0, 3.0]),
        old_values=torch.tensor([0.5, 2.5, 2.5]),
        returns=torch.tensor([1.5, 2.0, 2.0]),
        clip_coef=0.2,
    )
    kwargs.update(overrides)
    return ppo_loss_terms(**kwargs)


def test_clipped_surrogate_and_diagnostics_against_hand_computed_values():
    t = _terms()
    # per sample max(-A r, -A clip(r, .8, 1.2)): max(-.5, -.8), max(1, 1), max(-3, -2.4)
    assert t.policy.item() == pytest.approx((-0.5 + 1.0 - 2.4) / 3, abs=1e-6)
    assert t.clip_fraction.item() == pytest.approx(2 / 3, abs=1e-6)
    kl = ((-0.5 - math.log(0.5)) + 0.0 + (0.5 - math.log(1.5))) / 3
    assert t.approx_kl.item() == pytest.approx(kl, abs=1e-6)
    assert t.entropy.item() == pytest.approx(0.6, abs=1e-6)
    assert t.value.item() == pytest.approx(0.5 * (0.25 + 0 + 1) / 3, abs=1e-6)


def test_clipped_value_loss_against_hand_computed_values():
    t = _terms(value_clip_coef=0.2)
    # clipped values .7, 2.3, 2.7 -> errors .64, .09, .49; max with unclipped .25, 0, 1
    assert t.value.item() == pytest.approx(0.5 * (0.64 + 0.09 + 1.0) / 3, abs=1e-6)


def test_loss_is_fp32_and_finite_for_half_precision_inputs_with_large_log_ratios():
    t = _terms(new_logprob=torch.tensor([30.0, 0.0, -30.0], dtype=torch.bfloat16),
               old_logprob=torch.zeros(3, dtype=torch.bfloat16))
    assert t.policy.dtype == torch.float32
    assert torch.isfinite(t.policy)
    # by hand, in fp32: ratios e^30, 1, e^-30 with A = 1, -1, 2: max(-A r, -A clip(r, .8, 1.2)) = -1.2, 1, ~0
    assert t.policy.item() == pytest.approx((-1.2 + 1.0 - 2 * math.exp(-30)) / 3, abs=1e-6)
    assert t.clip_fraction.item() == pytest.approx(2 / 3)


def test_advantage_normalization_and_the_single_sample_guard():
    torch.testing.assert_close(normalize_advantages(torch.tensor([1.0, 2.0, 3.0])), torch.tensor([-1.0, 0.0, 1.0]))
    torch.testing.assert_close(normalize_advantages(torch.tensor([5.0])), torch.tensor([5.0]))


def test_explained_variance():
    assert explained_variance(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.0, 2.0, 3.0])) == pytest.approx(2 / 3)
    assert math.isnan(explained_variance(torch.zeros(3), torch.ones(3)))


def test_the_value_clip_range_is_its_own_and_is_not_annealed():
    # clip_vloss: a number is the value clip range (SB3's clip_range_vf); true is clip_coef as configured
    # (CleanRL's); with anneal_clip the policy's clip shrinks, the value clip range does not.
    from lit_ppo import PPODataModule, PPOModule
    from lit_ppo.collection.rollout import Minibatch

    spec = PPODataModule("CartPole-v1", num_envs=1, num_steps=8, minibatch_size=8).env_spec
    gen = torch.Generator().manual_seed(0)
    obs, actions = torch.randn(6, 4, generator=gen), torch.tensor([0, 1, 1, 0, 1, 0])
    for clip_vloss, expected_range in ((0.5, 0.5), (True, 0.2), (False, None)):
        torch.manual_seed(0)
        model = PPOModule(env_spec=spec, clip_coef=0.2, anneal_clip=True, clip_vloss=clip_vloss)
        with torch.no_grad():
            logprob, entropy, new_values = model.policy.evaluate(obs, actions)
        old_values, returns = new_values + torch.tensor([0.6, -0.45, 0.3, -0.1, 0.25, 0.0]), new_values + 1.0
        mb = Minibatch(obs, actions, logprob, old_values, torch.ones(6), returns)
        _, terms = model.objective(mb, clip_coef=0.05)  # the policy clip annealed to a quarter
        # by hand: new = old - d, clipped = old - clamp(d, -range, range) = new + d - clamp(d); returns = new + 1
        d = torch.tensor([0.6, -0.45, 0.3, -0.1, 0.25, 0.0])
        error = torch.ones(6)  # (new - returns)^2
        if expected_range is not None:
            clipped_error = (d - d.clamp(-expected_range, expected_range) - 1.0) ** 2
            error = torch.max(error, clipped_error)
        assert terms[1].item() == pytest.approx(0.5 * error.mean().item(), rel=1e-5), clip_vloss


def test_the_default_entropy_weight_is_null_0_01_for_continuous_actions_and_0_for_discrete():
    # model.ent_coef: null (the default) resolves by the action space. The loss is policy + vf_coef x value - ent_coef
    # x entropy, checked against the terms it returns; an explicit value is kept as given.
    from lit_ppo import PPODataModule, PPOModule
    from lit_ppo.collection.rollout import Minibatch

    default = object()
    cases = (("Pendulum-v1", default, 0.01), ("Pendulum-v1", None, 0.01), ("Pendulum-v1", 0.0, 0.0),
             ("Pendulum-v1", 0.03, 0.03), ("CartPole-v1", default, 0.0), ("CartPole-v1", None, 0.0),
             ("CartPole-v1", 0.02, 0.02))
    for env_id, given, expected in cases:
        spec = PPODataModule(env_id, num_envs=1, num_steps=8, minibatch_size=8).env_spec
        torch.manual_seed(0)
        model = PPOModule(env_spec=spec, **({} if given is default else {"ent_coef": given}))
        assert model.ppo.target_kl == 0.02  # the KL stop that replaced the bonus
        obs = torch.randn(5, spec["observation"]["shape"][0])
        with torch.no_grad():
            actions = model.policy.act(obs)[0]
            logprob, _, values = model.policy.evaluate(obs, actions)
        mb = Minibatch(obs, actions, logprob - 0.1, values, torch.tensor([1.0, -1.0, 0.5, 2.0, -0.5]), values + 1.0)
        loss, terms = model.objective(mb, clip_coef=0.2)
        policy, value, entropy = terms[0].item(), terms[1].item(), terms[2].item()
        assert entropy > 0, env_id
        expected_loss = policy + 0.5 * value - expected * entropy
        assert loss.item() == pytest.approx(expected_loss, rel=1e-6, abs=1e-7), (env_id, given)
