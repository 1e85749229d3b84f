"""Decoupled PPO for a rollout acted by an older policy (``data.overlap``: one version behind the learner).

PPO's clip keeps each update close to the policy it starts from. Overlapped, the stored log-probabilities are the
behaviour policy's, one update older than the learner's weights at the start of the update: clipped around them
(Cleanba's choice), the learner's policy already sits near the clip's edge before its first step, so many samples
give no gradient and learning per sample slows (``halfcheetah.yaml`` at 1M: 1704.2 against 1868.0 synchronous,
docs/notebook/results.md). Hilton et al. (2021, "Batch size-invariance for policy optimization", arXiv 2110.00641) decouple
the two roles: the clip is centred on the *proximal* policy (here: the learner's weights when the rollout's update
starts) and each sample's surrogate is weighted by ``pi_prox(a|s) / pi_behaviour(a|s)``, the importance weight
that makes the behaviour policy's samples stand for the proximal policy's. With no lag the weights are 1 and it is
PPO's own objective. Advantages and returns stay the collector's (GAE over the behaviour policy's values).

The weights are unbounded in principle: a sample the behaviour policy drew with a small probability that the
learner has since made likely gets a large weight, and one such sample can dominate a minibatch's gradient. The
surrogate truncates them at ``model.decoupled_max_weight`` (default 2), as V-trace (Espeholt et al. 2018, IMPALA)
truncates its importance ratios at rho-bar: above it the sample counts as if the proximal policy were twice as
likely as the behaviour one to take its action. With one update of lag the weights sit near 1 (a PPO update moves
each ratio by about the clip's 0.2), so the bound acts on the tail only; ``stats/truncated_weights`` says how much.
The rollout keeps the true weights (``stats/lag_kl`` is measured on them); the bound is the objective's.

With Cleanba's clip (``model.decoupled: false``) the KL early stop (``model.target_kl``) would measure each step from
the acting policy too, so the lag alone could spend its budget: on Pendulum-v1 with the package defaults, 5 of 48
overlapped rollouts applied 0-8 of their 320 updates, against 1 of 48 synchronous (seed 1, 100k steps). Where a stop
is set, the learner's own log-probabilities at the update's start are computed as here (:func:`measure_kl_from_learner`)
and the stop, and ``stats/approx_kl``, measure from them, as they do synchronously: the same forward pass, ~3% of an
update (``benchmarks/archive/decoupled_cost.py``).

With ``data.return_scaling`` the critic's values and targets are in units of the running std of the returns, which the
learner updates after every rollout from the rollout's GAE returns. A rollout acted one version behind carries them
from the acting critic, in the acting policy's units: an older critic's bootstrapped values, multiplied by a std that
the previous lagged rollout's returns had just inflated, inflated the next ones (Pendulum-v1, package defaults
overlapped: the rollouts' mean GAE return went from -102 to -129,700 in 12 rollouts, where true discounted returns
cannot pass -1,627; 200k steps ended at -1,315.8 / -1,325.6 / -1,168.0 on seeds 1-3, against -158.3
synchronous). So the learner first rescales the rollout's values and targets to its own std
(:func:`in_learner_units`), then computes its advantages and targets with its own critic, and merges those returns
into the std, as a synchronous rollout has them (``PPOModule.training_step``; the collector keeps the trace for it).
Rescaling alone was not enough: every other rollout still grew ~15x per two. A recurrent policy cannot recompute its
values one by one, so that combination is refused.
"""

import dataclasses

import torch
from torch import Tensor

from lit_ppo.collection.rollout import Rollout
from lit_ppo.learning.losses import weighted_mean
from lit_ppo.networks.actor_critic import ActorCritic


@torch.no_grad()
def proximal(policy: ActorCritic, rollout: Rollout) -> tuple[Tensor, Tensor]:
    """The proximal policy's (``policy``'s, the learner's as the update starts) log-probabilities and values of the
    rollout's samples.

    One forward pass over the rollout, minibatch by minibatch in the first pass's order (a partition of the rollout;
    recurrent: whole environment sequences, as the update replays them), under the caller's autocast."""
    logprobs, values = torch.empty_like(rollout.logprobs), torch.empty_like(rollout.values)
    for index in rollout.minibatch_indices[0]:
        mb = rollout.minibatch(index)
        logprob, _, value = policy.evaluate(mb.obs, mb.actions, mb.action_masks, mb.recurrent_states, mb.episode_starts)
        logprobs[index], values[index] = logprob.to(logprobs.dtype), value.to(values.dtype)
    return logprobs, values


def decouple(policy: ActorCritic, rollout: Rollout) -> Rollout:
    """``rollout`` with the proximal policy's log-probabilities and values in place of the behaviour policy's (so the
    ratio, its clip, ``approx_kl`` and a value clip are taken around them) and ``importance_weights``
    ``exp(logprob_prox - logprob_behaviour)`` for the surrogate."""
    logprobs, values = proximal(policy, rollout)
    weights = (logprobs.float() - rollout.logprobs.float()).exp()
    return dataclasses.replace(rollout, logprobs=logprobs, values=values, importance_weights=weights)


def in_learner_units(policy: ActorCritic, rollout: Rollout) -> Rollout:
    """``rollout`` with its values and critic targets in units of ``policy``'s std of the returns
    (``data.return_scaling``) instead of the acting policy's (``rollout.value_scale``): unchanged where they agree."""
    learner = float(policy.value_scale())
    if learner == rollout.value_scale:
        return rollout
    ratio = rollout.value_scale / learner
    return dataclasses.replace(rollout, values=rollout.values * ratio, returns=rollout.returns * ratio,
                               value_scale=learner)


def measure_kl_from_learner(policy: ActorCritic, rollout: Rollout) -> Rollout:
    """``rollout`` with ``proximal_logprobs``: Cleanba's clip stays around the acting policy, the KL stop and
    ``stats/approx_kl`` measure from the learner's policy at the update's start."""
    return dataclasses.replace(rollout, proximal_logprobs=proximal(policy, rollout)[0])


def lag_kl(rollout: Rollout) -> float:
    """The approximate KL of the proximal policy from the behaviour one, ``mean((w - 1) - log w)`` over the real
    transitions: how far the learner had moved from the policy that acted (``stats/lag_kl``)."""
    if rollout.importance_weights.numel():
        w = rollout.importance_weights.double()
    else:  # Cleanba's clip, measured from the learner (measure_kl_from_learner)
        w = (rollout.proximal_logprobs.double() - rollout.logprobs.double()).exp()
    mean = weighted_mean(rollout.weights.double() if rollout.weights.numel() else None)
    return float(mean((w - 1.0) - w.log()))


def truncated_share(rollout: Rollout, max_weight: float) -> float:
    """The share of the real transitions whose importance weight the surrogate truncates (``stats/truncated_weights``)."""
    mean = weighted_mean(rollout.weights.double() if rollout.weights.numel() else None)
    return float(mean((rollout.importance_weights > max_weight).double()))
