"""The PPO loss terms as pure functions: the caller sums and logs them."""

from typing import Callable, NamedTuple, Optional, Union

import torch
from torch import Tensor


# The logged names of PPOLossTerms' fields, in order.
LOSS_NAMES = ("losses/policy", "losses/value", "losses/entropy", "stats/approx_kl", "stats/clip_fraction")


class PPOLossTerms(NamedTuple):
    policy: Tensor  # clipped surrogate, to minimize
    value: Tensor  # 0.5 * MSE (optionally clipped), to minimize
    entropy: Tensor  # mean entropy, to maximize
    approx_kl: Tensor  # mean((r - 1) - log r), the low-variance estimator of KL(old || new)
    clip_fraction: Tensor  # share of samples whose ratio left [1 - eps, 1 + eps]


def normalize_advantages(advantages: Tensor, weights: Optional[Tensor] = None) -> Tensor:
    """(A - mean) / (std + 1e-8), mean and (unbiased) std over the samples of weight 1 when ``weights`` are given;
    a single sample has no spread, so it is left as it is."""
    if weights is None:
        if advantages.numel() <= 1:
            return advantages
        return (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    count = weights.sum()
    mean = (weights * advantages).sum() / count.clamp_min(1.0)
    var = (weights * (advantages - mean) ** 2).sum() / (count - 1.0).clamp_min(1.0)
    normalized = (advantages - mean) / (var.sqrt() + 1e-8)
    return torch.where(count > 1, normalized, advantages)


def weighted_mean(weights: Optional[Tensor]) -> Callable[[Tensor], Tensor]:
    """The mean over samples: plain, or weighted by ``weights`` (0/1: over the real transitions only)."""
    if weights is None:
        return torch.mean
    total = weights.sum().clamp_min(1.0)
    return lambda x: (x * weights).sum() / total


def ppo_loss_terms(
    new_logprob: Tensor,
    old_logprob: Tensor,
    advantages: Tensor,
    entropy: Tensor,
    new_values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    clip_coef: Union[float, Tensor],
    value_clip_coef: Union[float, Tensor, None] = None,
    weights: Optional[Tensor] = None,
    importance_weights: Optional[Tensor] = None,
    max_importance_weight: Optional[float] = None,
    kl_logprob: Optional[Tensor] = None,
) -> PPOLossTerms:
    """All terms in fp32 whatever the autocast state, so ``exp(log_ratio)`` cannot overflow in half precision.
    With ``weights``, every term is a mean over the samples weighted by them (a reset step's weight is 0). With
    ``importance_weights`` (decoupled PPO, :mod:`lit_ppo.learning.decoupled`), each sample's clipped surrogate is multiplied
    by its weight, truncated at ``max_importance_weight`` where given; ``old_logprob`` is then the proximal policy's.
    ``approx_kl`` measures from ``kl_logprob`` where given (the learner's policy at the update's start, when the clip
    is around an older acting policy's ``old_logprob``), else from ``old_logprob``."""
    mean = weighted_mean(weights)
    new_logprob, old_logprob = new_logprob.float(), old_logprob.float()
    advantages, new_values = advantages.float(), new_values.float()
    log_ratio = new_logprob - old_logprob
    ratio = log_ratio.exp()
    surrogate = torch.max(-advantages * ratio, -advantages * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef))
    if importance_weights is not None:
        weight = importance_weights.float()
        if max_importance_weight is not None:
            weight = weight.clamp(max=max_importance_weight)
        surrogate = weight * surrogate
    value_error = (new_values - returns) ** 2
    if value_clip_coef is not None:
        clipped = old_values + (new_values - old_values).clamp(-value_clip_coef, value_clip_coef)
        value_error = torch.max(value_error, (clipped - returns) ** 2)
    with torch.no_grad():
        if kl_logprob is None:
            approx_kl = mean((ratio - 1.0) - log_ratio)
        else:
            kl_log_ratio = new_logprob - kl_logprob.float()
            approx_kl = mean((kl_log_ratio.exp() - 1.0) - kl_log_ratio)
        clip_fraction = mean(((ratio - 1.0).abs() > clip_coef).float())
    return PPOLossTerms(mean(surrogate), 0.5 * mean(value_error), mean(entropy.float()), approx_kl, clip_fraction)
