"""Distribution heads, one per action space: sampling, log-probabilities and entropy as plain tensor functions.

Heads work on tensors directly rather than through ``torch.distributions`` objects: validating and building one
per acting step cost more than a CartPole step itself. A head's ``params`` are the actor's output (for the
Gaussian, with the policy's log-std appended); actions have shape ``(batch, *action_shape)``.
"""

import math
from collections.abc import Sequence
from typing import Callable, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from lit_ppo.envs.spaces import ActionSpec, BoxSpec, DiscreteSpec, MultiBinarySpec, MultiDiscreteSpec

LOG_2PI = math.log(2 * math.pi)
# The logit of a masked (invalid) action: finite, so that its probability is exactly 0 in float32 and
# 0 * log p stays 0 in the entropy (-inf would give NaN there); sb3-contrib's MaskablePPO uses the same.
MASKED_LOGIT = -1e8


def _random_like(fn: Callable, like: Tensor, generator: Optional[torch.Generator]) -> Tensor:
    """``torch.rand_like``/``randn_like``: shaped like a tensor rather than by its sizes, so an exported graph
    keeps a dynamic batch axis; without a generator (an exported policy) through the overload ONNX can translate
    (same numbers either way)."""
    return fn(like) if generator is None else fn(like, generator=generator)


def _categorical_sample(logits: Tensor, generator: Optional[torch.Generator]) -> Tensor:
    # argmax(p / E) with E ~ Exp(1) is an exact categorical sample (the exponential race).
    probs = logits.softmax(-1)
    return exponential_race(probs, torch.empty_like(probs).exponential_(generator=generator))


def exponential_race(probs: Tensor, race: Tensor) -> Tensor:
    """``argmax(probs / race)``. The CPU's exponential draw can be exactly 0: a masked action (p = 0) would then
    give 0 / 0 = NaN, which ``argmax`` picks; the draw is clamped to the smallest positive float."""
    return (probs / race.clamp_min(torch.finfo(race.dtype).tiny)).argmax(-1)


def _categorical_log_prob(logits: Tensor, actions: Tensor) -> Tensor:
    return logits.log_softmax(-1).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def _categorical_entropy(logits: Tensor) -> Tensor:
    log_probs = logits.log_softmax(-1)
    return -(log_probs.exp() * log_probs).sum(-1)


class DistributionHead:
    """What every head offers besides ``sample``/``mode``/``log_prob``/``entropy``.

    Invalid-action masks (``mask_size`` booleans per sample, True = valid, the sb3-contrib convention) apply to the
    parameters before anything else (:meth:`masked`): masked actions then have probability 0 in sampling, in the
    log-probability and in the entropy, and the mode is the most probable valid action. ``mask_size`` is None for
    heads without masks (the Gaussian).
    """

    mask_size: Optional[int] = None

    def masked(self, params: Tensor, mask: Tensor) -> Tensor:
        """``params`` with the invalid actions of ``mask`` (``[batch, mask_size]``) made impossible."""
        return torch.where(mask, params, MASKED_LOGIT)

    def components_valid(self, mask: Tensor) -> Tensor:
        """``[batch]``: whether every component of each row's action has at least one valid choice."""
        return mask.any(-1)

    def log_prob_entropy(self, params: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """``log_prob`` and ``entropy`` together, as the PPO loss needs them (heads may share work)."""
        return self.log_prob(params, actions), self.entropy(params)

    def choose(
        self, params: Tensor, generator: Optional[torch.Generator] = None, deterministic: bool = False
    ) -> tuple[Tensor, Tensor]:
        """An action (sampled, or the mode when ``deterministic``) and its log-probability: what acting needs."""
        action = self.mode(params) if deterministic else self.sample(params, generator)
        return action, self.log_prob(params, action)


class CategoricalHead(DistributionHead):
    """A categorical distribution over ``n`` actions (``Discrete``), parameterized by logits."""

    def __init__(self, n: int) -> None:
        self.num_outputs = self.mask_size = n
        self.action_shape: tuple[int, ...] = ()

    def sample(self, logits: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        return _categorical_sample(logits, generator)

    def mode(self, logits: Tensor) -> Tensor:
        return logits.argmax(-1)

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        return _categorical_log_prob(logits, actions)

    def entropy(self, logits: Tensor) -> Tensor:
        return _categorical_entropy(logits)

    def log_prob_entropy(self, logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        log_probs = logits.log_softmax(-1)  # once for both
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        return log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1), entropy


class MultiCategoricalHead(DistributionHead):
    """Independent categoricals, one per ``MultiDiscrete`` component; the logits of all components concatenated."""

    def __init__(self, nvec: Sequence[int], shape: Sequence[int]) -> None:
        self.nvec = [int(n) for n in nvec]
        self.num_outputs = self.mask_size = sum(self.nvec)  # masks: the components' masks concatenated
        self.action_shape = tuple(shape)

    def components_valid(self, mask: Tensor) -> Tensor:
        return torch.stack([part.any(-1) for part in mask.split(self.nvec, dim=-1)], -1).all(-1)

    def _per_component(self, fn: Callable, logits: Tensor, *actions: Tensor) -> Tensor:
        parts = logits.split(self.nvec, dim=-1)
        if actions:
            flat = actions[0].reshape(*logits.shape[:-1], len(self.nvec))
            return torch.stack([fn(p, flat[..., i]) for i, p in enumerate(parts)], -1)
        return torch.stack([fn(p) for p in parts], -1)

    def sample(self, logits: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        samples = self._per_component(lambda p: _categorical_sample(p, generator), logits)
        return samples.reshape(*logits.shape[:-1], *self.action_shape)

    def mode(self, logits: Tensor) -> Tensor:
        return self._per_component(lambda p: p.argmax(-1), logits).reshape(*logits.shape[:-1], *self.action_shape)

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        return self._per_component(_categorical_log_prob, logits, actions).sum(-1)

    def entropy(self, logits: Tensor) -> Tensor:
        return self._per_component(_categorical_entropy, logits).sum(-1)


class BernoulliHead(DistributionHead):
    """Independent Bernoullis, one per ``MultiBinary`` element, parameterized by logits; actions are 0./1. floats."""

    def __init__(self, shape: Sequence[int]) -> None:
        self.action_shape = tuple(shape)
        self.num_outputs = math.prod(self.action_shape)
        self.mask_size = 2 * self.num_outputs  # per element: [0 valid, 1 valid] (sb3-contrib's layout)

    def masked(self, logits: Tensor, mask: Tensor) -> Tensor:
        pairs = mask.view(*mask.shape[:-1], self.num_outputs, 2)
        logits = torch.where(pairs[..., 1], logits, MASKED_LOGIT)  # 1 invalid: always 0
        return torch.where(pairs[..., 0], logits, -MASKED_LOGIT)  # 0 invalid: always 1

    def components_valid(self, mask: Tensor) -> Tensor:
        return mask.view(*mask.shape[:-1], self.num_outputs, 2).any(-1).all(-1)

    def sample(self, logits: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        uniform = _random_like(torch.rand_like, logits, generator)
        return (uniform < logits.sigmoid()).float().reshape(*logits.shape[:-1], *self.action_shape)

    def mode(self, logits: Tensor) -> Tensor:
        return (logits > 0).float().reshape(*logits.shape[:-1], *self.action_shape)

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        actions = actions.reshape(logits.shape).float()
        return -F.binary_cross_entropy_with_logits(logits, actions, reduction="none").sum(-1)

    def entropy(self, logits: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(logits, logits.sigmoid(), reduction="none").sum(-1)


class DiagGaussianHead(DistributionHead):
    """A diagonal Gaussian over a ``Box``: the mean from the actor, a state-independent log-std (a parameter of
    :class:`ActorCritic`, initialized to 0) appended to it, so ``params = cat([mean, log_std], -1)``.

    Clip, not squash: samples are unbounded; :func:`lit_ppo.envs.spaces.actions_to_env` clips them to the Box when they
    are sent to the environment, while the rollout stores the sampled action and its log-prob (CleanRL, SB3).
    Squashing with tanh would keep samples in bounds but needs a log-det correction and a rescaling to the
    bounds; clipping keeps the Gaussian's log-prob and entropy exact and is PPO's reference choice.
    """

    def __init__(self, shape: Sequence[int]) -> None:
        self.action_shape = tuple(shape)
        self.num_outputs = math.prod(self.action_shape)  # means; ActorCritic appends as many log-stds

    def sample(self, params: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        mean, log_std = params.chunk(2, dim=-1)
        noise = _random_like(torch.randn_like, mean, generator)
        return (mean + log_std.exp() * noise).reshape(*mean.shape[:-1], *self.action_shape)

    def mode(self, params: Tensor) -> Tensor:
        mean = params.chunk(2, dim=-1)[0]
        return mean.reshape(*mean.shape[:-1], *self.action_shape)

    def log_prob(self, params: Tensor, actions: Tensor) -> Tensor:
        mean, log_std = params.chunk(2, dim=-1)
        z = (actions.reshape(mean.shape).float() - mean) * (-log_std).exp()
        return (-0.5 * z.square() - log_std - 0.5 * LOG_2PI).sum(-1)

    def entropy(self, params: Tensor) -> Tensor:
        log_std = params.chunk(2, dim=-1)[1]
        return (log_std + 0.5 * (1.0 + LOG_2PI)).sum(-1)


Head = Union[CategoricalHead, MultiCategoricalHead, BernoulliHead, DiagGaussianHead]


def make_head(spec: ActionSpec) -> Head:
    """The distribution head for an action spec (:func:`lit_ppo.envs.spaces.action_spec`)."""
    if isinstance(spec, DiscreteSpec):
        return CategoricalHead(spec.n)
    if isinstance(spec, BoxSpec):
        return DiagGaussianHead(spec.shape)
    if isinstance(spec, MultiDiscreteSpec):
        return MultiCategoricalHead(spec.nvec, spec.shape)
    if isinstance(spec, MultiBinarySpec):
        return BernoulliHead(spec.shape)
    raise TypeError(f"no distribution head for action spec {spec!r}")
