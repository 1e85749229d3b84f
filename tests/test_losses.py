import math

import pytest
import torch

from lit_ppo.losses import explained_variance, normalize_advantages, ppo_loss_terms


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


def test_advantage_normalization_and_the_single_sample_guard():
    torch.testing.assert_close(normalize_advantages(torch.tensor([1.0, 2.0, 3.0])), torch.tensor([-1.0, 0.0, 1.0]))
    torch.testing.assert_close(normalize_advantages(torch.tensor([5.0])), torch.tensor([5.0]))


def test_explained_variance():
    assert explained_variance(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.0, 2.0, 3.0])) == pytest.approx(2 / 3)
    assert math.isnan(explained_variance(torch.zeros(3), torch.ones(3)))
