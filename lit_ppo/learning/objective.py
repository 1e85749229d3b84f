"""The minibatch objective: the policy's log-probabilities, entropy and values for a minibatch, PPO's loss terms,
and their weighted sum, eager or through ``torch.compile``.
"""

import warnings
from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor

from lit_ppo.collection.rollout import Minibatch
from lit_ppo.errors import require
from lit_ppo.learning.losses import normalize_advantages, ppo_loss_terms
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.envs.spaces import BoxSpec, spec_from_dict



# model.ent_coef: null (the default since 2026-12-08, and from 2026-12-03 to 2026-12-06; 0 in between): 0.01 for
# continuous (Box, Gaussian) actions, 0 otherwise. With a first std of 1 it cost Ant-v5 most of its score (241.5
# against 2,274.9 under the KL stop, seed 1); with the narrower first std (model.log_std_init) Ant-v5 keeps 2,290.9 (3
# seeds) and Swimmer-v5 finds its fast stroke on 5 seeds of 5, where without it that Gaussian settles into the slow
# gait (docs/zoo.md, "Without a config").
CONTINUOUS_ENT_COEF = 0.01


def default_ent_coef(action: dict[str, Any]) -> float:
    """The entropy weight ``model.ent_coef: null`` means for an action space (``env_spec["action"]``)."""
    return CONTINUOUS_ENT_COEF if isinstance(spec_from_dict(action), BoxSpec) else 0.0


class PPOObjective:
    """``objective(minibatch, clip_coef) -> (loss, terms)``: ``loss`` to minimize (policy + ``vf_coef`` x value -
    ``ent_coef`` x entropy) and the detached terms stacked in :data:`lit_ppo.learning.losses.LOSS_NAMES` order.

    ``value_clip`` is the value clip range (SB3's ``clip_range_vf``): the new values stay within it of the rollout's
    values, or None for no value clipping. It is its own constant, not the policy's (possibly annealed) clip.
    ``max_importance_weight`` truncates decoupled PPO's importance weights in the surrogate (None: unbounded).

    With ``compile`` (``True`` or a ``torch.compile`` mode), the forward pass and the loss run as one compiled
    graph, and so does its backward (AOTAutograd): at PPO's minibatch sizes the eager ops are launch- and
    dispatch-bound, and the compiled graph fuses the elementwise work. ``"reduce-overhead"`` also captures the
    graphs as CUDA graphs on a GPU (one launch per minibatch; shapes are static: every minibatch of a rollout has
    ``minibatch_size`` samples). The optimizer step stays outside, in Lightning's precision plugin, which owns the
    loss scaling of ``16-mixed`` (scale, unscale, skip on overflow) and the hooks around it. The clip coefficient
    enters as a tensor so that annealing it does not recompile. If the first (compiling) call fails (no C++
    compiler, an unsupported op), it says so once and stays eager; an error in any later call is a real error and
    is raised. Not an ``nn.Module``: the policy is the module's.
    """

    def __init__(self, policy: ActorCritic, vf_coef: float, ent_coef: float, value_clip: Optional[float] = None,
                 compile: Union[bool, str] = False, max_importance_weight: Optional[float] = None) -> None:
        # A recurrent core splits each sequence at its episode starts into pieces whose lengths are data: every
        # rollout's shapes differ, so Dynamo breaks the graph and recompiles instead of fusing anything (measured,
        # both beside two other runs: a 4k-step cartpole_pomdp fit took 32 s against 10 s eager, with pages of
        # graph-break warnings).
        require(not (compile and policy.state_size), "model.compile",
                "is not supported with model.recurrent (the sequence pieces between episode starts have "
                "data-dependent shapes, which torch.compile cannot fuse); set model.compile: false.")
        self.policy, self.vf_coef, self.ent_coef, self.value_clip = policy, vf_coef, ent_coef, value_clip
        self.max_importance_weight = max_importance_weight  # decoupled PPO's truncation (lit_ppo.learning.decoupled)
        mode = None if compile is True or compile == "default" else compile
        self.compiled: Optional[Callable] = torch.compile(self._objective, mode=mode) if compile else None
        self._compiled_ok = False  # the first compiled call succeeded: later errors are raised, not hidden
        self._clip: Optional[tuple[float, Tensor]] = None  # the clip coefficient as the compiled graph takes it

    @staticmethod
    def prepare(minibatch: Minibatch, norm_adv: bool) -> Minibatch:
        """The minibatch as the objective takes it: advantages normalized per minibatch when ``norm_adv``."""
        if not norm_adv:
            return minibatch
        # per minibatch, as PPO's reference implementations do; over its real transitions
        return minibatch._replace(advantages=normalize_advantages(minibatch.advantages.float(), minibatch.weights))

    def _objective(self, mb: Minibatch, clip_coef) -> tuple[Tensor, Tensor]:
        logprob, entropy, new_values = self.policy.evaluate(mb.obs, mb.actions, mb.action_masks, mb.recurrent_states,
                                                            mb.episode_starts)
        terms = ppo_loss_terms(logprob, mb.logprobs, mb.advantages, entropy, new_values, mb.values, mb.returns,
                               clip_coef=clip_coef, value_clip_coef=self.value_clip, weights=mb.weights,
                               importance_weights=mb.importance_weights,
                               max_importance_weight=self.max_importance_weight, kl_logprob=mb.proximal_logprobs)
        loss = terms.policy + self.vf_coef * terms.value
        if self.ent_coef:  # with no bonus, backward does not go through the entropy at all
            loss = loss - self.ent_coef * terms.entropy
        return loss, torch.stack([t.detach() for t in terms])

    def __call__(self, minibatch: Minibatch, clip_coef: float) -> tuple[Tensor, Tensor]:
        if self.compiled is None:
            return self._objective(minibatch, clip_coef)
        if self._clip is None or self._clip[0] != clip_coef:  # once per rollout, not a copy per update
            self._clip = (clip_coef, torch.tensor(clip_coef, device=minibatch.obs.device))
        if self._compiled_ok:
            return self.compiled(minibatch, self._clip[1])
        try:
            result = self.compiled(minibatch, self._clip[1])
        except Exception as err:  # the compiler's failure, raised at the first call
            warnings.warn(f"lit_ppo: model.compile: torch.compile failed ({type(err).__name__}: "
                          f"{str(err).splitlines()[0][:300]}); the updates run eagerly.", stacklevel=2)
            self.compiled = None
            return self._objective(minibatch, clip_coef)
        self._compiled_ok = True
        return result
