"""The rollout batch: everything one process's rollout hands the learner, in one documented type.

Data flows one way: the data module acts with the policy it was given, collects a rollout on the CPU and yields
a :class:`Rollout`; :class:`lit_ppo.learning.module.PPOModule` learns from it and logs what it carries. Any data module
that yields this type can train a ``PPOModule``.

Each field is declared once, here, with its role: a per-sample tensor (every minibatch takes its rows), a
per-environment tensor (a minibatch takes its environments' rows), a tensor whose length varies from rollout to
rollout, or a plain value. :data:`Minibatch` (what the objective takes) and the overlap's transport
(:mod:`lit_ppo.collection.overlap.transport`) are derived from these roles.
"""

import collections
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from torch import Tensor

# The keys of Rollout.timings, milliseconds of this rollout's collection, each measured where the work happens.
TIMING_KEYS = ("env_ms", "act_ms", "gae_ms", "sync_ms")

# A field's role (its ``metadata["role"]``). TRACE: a whole-rollout tensor of fixed shape that no minibatch takes.
SAMPLE, PER_ENV, VARIABLE, TRACE = "sample", "per_env", "variable", "trace"


def _tensor(role: str, empty: Optional[tuple[tuple[int, ...], torch.dtype]] = None) -> Any:
    """A tensor field with its role; ``empty``: an optional one, ``(shape, dtype)`` of its empty default (absent)."""
    if empty is None:
        return field(metadata={"role": role})
    shape, dtype = empty
    return field(default_factory=lambda: torch.zeros(shape, dtype=dtype), metadata={"role": role, "optional": True})


@dataclass
class Rollout:
    """One rollout of one process: ``B = num_envs * num_steps`` samples, flattened step-major.

    Samples (``[B, ...]`` tensors, on the CPU until Lightning moves the batch to the learner's device):
        obs: observations as the policy takes them (:func:`lit_ppo.envs.spaces.observations_to_tensor`); also what
            the observation-normalization statistics are updated from.
        actions: the sampled actions (``[B, *action_shape]``), as stored before clipping to a Box's bounds.
        logprobs, values: the acting policy's log-probability of each action and its value estimate.
        advantages, returns: GAE(lambda) advantages and ``advantages + values``.
        weights: ``[B]`` float, 1 for a real transition and 0 for the reset step of a next-step-autoreset vector
            env (whose action was ignored): the weight of each sample in every loss term and in advantage
            normalization. Empty when every sample is real (same-step autoreset), so the update skips the
            weighting altogether.
        action_masks: ``[B, mask_size]`` bool, the invalid-action masks each action was chosen under (True = valid;
            :mod:`lit_ppo.collection.action_masks`), re-applied when the update recomputes log-probabilities and entropy.
            Empty without ``data.action_masks``.
        episode_starts: ``[B]`` bool, the inputs that begin an episode, where a recurrent policy's state is zeroed
            (:mod:`lit_ppo.networks.recurrent`). Empty for a feed-forward policy.
        importance_weights: ``[B]`` float, each sample's surrogate weight ``pi_prox / pi_behaviour`` of decoupled
            PPO (:mod:`lit_ppo.learning.decoupled`), set by the learner; empty otherwise.
        proximal_logprobs: ``[B]`` float, the learner's log-probabilities at the start of the update, where the clip
            stays around the acting policy's ``logprobs`` (``data.overlap`` with Cleanba's clip and a KL stop): what
            ``stats/approx_kl`` and ``model.target_kl`` measure from (:mod:`lit_ppo.learning.decoupled`), set by the
            learner; empty otherwise.

    Recurrent policies only:
        recurrent_states: ``[num_envs, state_size]``, each environment's recurrent state before the rollout's first
            step: with ``episode_starts``, what the update needs to replay each environment's sequence as acting saw
            it. Empty for a feed-forward policy.

    The update's order:
        minibatch_indices: ``[update_epochs, num_minibatches, minibatch_size]`` long: row ``e, m`` picks the
            samples of minibatch ``m`` of pass ``e``. Recurrent: a minibatch is whole environment sequences, its row
            step-major (``t * num_envs + env`` for each step ``t`` of each of its environments), so that it reshapes
            to ``[num_steps, envs]``.

    What recomputing the advantages needs (``data.recompute_advantages``, or see ``recompute_advantages`` below; all
    empty otherwise):
        rewards, terminated, dones: ``[B]`` the rewards GAE used (scaled where ``data.normalize_reward``), and
            whether each step ended its episode by termination / by either termination or truncation.
        next_obs: ``[num_envs, ...]`` the observations after the rollout's last step, whose values close the trace.
        final_obs, final_index: ``[K, ...]`` and ``[K]`` (same-step autoreset) the final observations of the episodes
            truncated during the rollout and the samples they follow, bootstrapped from.
        gamma, gae_lambda: the discount and lambda the collector used.

    Statistics and bookkeeping:
        reward_returns: at the real transitions, the discounted returns of the raw rewards, from which the reward
            scale is estimated (``data.normalize_reward``), or the GAE returns in raw units, whose std the critic's
            values are in units of (``data.return_scaling``); empty when both are off.
        episode_returns, episode_lengths: ``[E]`` every episode that finished during this rollout.
        episode_rows: ``[E]`` the vector env's row each of them ran in (with several agents: which agent).
        team_returns: ``[C]`` with several agents, each copy's episode that finished during this rollout: the sum of
            its agents' returns (empty for a single-agent env).
        timings: milliseconds of collection by phase (:data:`TIMING_KEYS`), plus any one-off measurement of the
            actor's placement (``act_cpu_us``, ``act_learner_us``).
        nonfinite: which of the environments' outputs held NaN/inf in this rollout (``"rewards"``,
            ``"observations"``), so that a non-finite loss can name its cause.
        explained_variance: how well the acting values predicted ``returns`` on the real transitions (1 perfect, 0
            a constant).
        value_scale: what ``values`` and ``returns`` are in units of (``data.return_scaling``: the acting policy's
            running std of the GAE returns; 1 otherwise). A learner one version ahead has merged another rollout into
            that std since (:func:`lit_ppo.learning.decoupled.in_learner_units`).
        env_steps: environment steps of all processes together, this rollout included.
        budget_fraction: the fraction of the step budget done before this rollout (0.0 for the first): what
            learning-rate and clip annealing follow.
        final: this rollout reaches the step budget: training stops after its updates.
        policy_lag: how many updates the acting policy may be behind the learner's weights at this rollout's update:
            0 synchronous, 1 with ``data.overlap`` (:mod:`lit_ppo.collection.overlap.dataset`).
        recompute_advantages: ``data.recompute_advantages``: the learner recomputes the advantages before every pass
            after the first. The trace is also kept without it for a rollout acted one version behind with
            ``data.return_scaling``, whose advantages the learner computes with its own critic before the first pass.
    """

    obs: Tensor = _tensor(SAMPLE)
    actions: Tensor = _tensor(SAMPLE)
    logprobs: Tensor = _tensor(SAMPLE)
    values: Tensor = _tensor(SAMPLE)
    advantages: Tensor = _tensor(SAMPLE)
    returns: Tensor = _tensor(SAMPLE)
    minibatch_indices: Tensor = field()
    reward_returns: Tensor = _tensor(VARIABLE)
    episode_returns: Tensor = _tensor(VARIABLE)
    episode_lengths: Tensor = _tensor(VARIABLE)
    episode_rows: Tensor = _tensor(VARIABLE, empty=((0,), torch.long))
    team_returns: Tensor = _tensor(VARIABLE, empty=((0,), torch.float32))
    timings: dict[str, float] = field(default_factory=dict)
    weights: Tensor = _tensor(SAMPLE, empty=((0,), torch.float32))
    action_masks: Tensor = _tensor(SAMPLE, empty=((0, 0), torch.bool))
    episode_starts: Tensor = _tensor(SAMPLE, empty=((0,), torch.bool))
    recurrent_states: Tensor = _tensor(PER_ENV, empty=((0, 0), torch.float32))
    importance_weights: Tensor = _tensor(SAMPLE, empty=((0,), torch.float32))
    proximal_logprobs: Tensor = _tensor(SAMPLE, empty=((0,), torch.float32))
    rewards: Tensor = _tensor(TRACE, empty=((0,), torch.float32))
    terminated: Tensor = _tensor(TRACE, empty=((0,), torch.bool))
    dones: Tensor = _tensor(TRACE, empty=((0,), torch.bool))
    next_obs: Tensor = _tensor(TRACE, empty=((0,), torch.float32))
    final_obs: Tensor = _tensor(VARIABLE, empty=((0,), torch.float32))
    final_index: Tensor = _tensor(VARIABLE, empty=((0,), torch.long))
    gamma: float = float("nan")
    gae_lambda: float = float("nan")
    nonfinite: tuple[str, ...] = ()
    explained_variance: float = float("nan")
    value_scale: float = 1.0
    env_steps: int = 0
    budget_fraction: float = 0.0
    final: bool = False
    policy_lag: int = 0
    recompute_advantages: bool = False

    @property
    def size(self) -> int:
        return int(self.advantages.shape[0])

    def minibatch(self, index: Optional[Tensor] = None) -> "Minibatch":
        """The per-sample tensors, all of them or the rows ``index``, with an optional one None where the rollout has
        none; recurrent: with ``recurrent_states`` of the minibatch's environments, whose first step's rows lead
        ``index``."""
        parts: dict[str, Tensor] = {}
        for f in dataclasses.fields(self):
            role, value = f.metadata.get("role"), getattr(self, f.name)
            if role not in (SAMPLE, PER_ENV) or (f.metadata.get("optional") and not value.numel()):
                continue
            if index is None:
                parts[f.name] = value
            elif role == SAMPLE:
                parts[f.name] = value[index]
            else:  # rows t * num_envs + env, step-major: the first len(index) / num_steps are step 0's environments
                parts[f.name] = value[index[: index.numel() * value.shape[0] // self.size]]
        return Minibatch(**parts)

    @property
    def update_epochs(self) -> int:
        return int(self.minibatch_indices.shape[0])

    @property
    def has_trace(self) -> bool:
        """It carries what :func:`lit_ppo.collection.gae.recompute_gae` needs (``data.recompute_advantages``)."""
        return bool(self.rewards.numel())

    def minibatches(self, epoch: Optional[int] = None) -> Iterator["Minibatch"]:
        """The update's minibatches in order: ``update_epochs`` passes of ``num_minibatches`` (``epoch``: that pass's
        only). A minibatch that is the whole rollout is the rollout itself (no gather: the loss does not depend on
        the order of the samples), the same object in every pass."""
        whole = None
        indices = self.minibatch_indices.flatten(0, 1) if epoch is None else self.minibatch_indices[epoch]
        for index in indices:
            if index.numel() == self.size:
                whole = whole if whole is not None else self.minibatch()
                yield whole
            else:
                yield self.minibatch(index)

    def pin_memory(self) -> "Rollout":
        """Page-locked copies (the DataLoader calls this with ``pin_memory=True``), so that the one copy per rollout
        to a CUDA learner can run asynchronously."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).pin_memory()
                                            for f in dataclasses.fields(self) if isinstance(getattr(self, f.name), Tensor)})


def fields_with_role(role: str) -> tuple[str, ...]:
    """The names of :class:`Rollout`'s fields with this role, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(Rollout) if f.metadata.get("role") == role)


def _minibatch_type() -> type:
    fields_ = [f for f in dataclasses.fields(Rollout) if f.metadata.get("role") in (SAMPLE, PER_ENV)]
    required = [f.name for f in fields_ if not f.metadata.get("optional")]
    optional = [f.name for f in fields_ if f.metadata.get("optional")]
    return collections.namedtuple("Minibatch", required + optional, defaults=[None] * len(optional))


# One minibatch as the objective takes it: the rollout's per-sample (and per-environment) fields by name, the
# optional ones None where absent. A named tuple, so ``torch.compile`` flattens it as it would a tuple, and a reorder
# cannot swap two same-shaped tensors.
Minibatch = _minibatch_type()
