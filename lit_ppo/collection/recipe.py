"""What one rank's rollout stream is made from, as plain picklable data: the data module builds its stream from it
in its own process, and with ``data.overlap`` a collector process builds the same stream from the same recipe."""

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from lit_ppo.collection.action_masks import ActionMaskReader
from lit_ppo.collection.datasets import RolloutDataset
from lit_ppo.envs.make import make_vector_env
from lit_ppo.errors import ConfigError
from lit_ppo.collection.collector import RolloutCollector
from lit_ppo.envs.spaces import spec_from_dict
from lit_ppo.envs.stagger import staggered


@dataclass(frozen=True)
class RolloutRecipe:
    """The settings of rank ``rank``'s rollout stream.

    Args:
        settings: the data module's hyperparameters (``PPODataModule.hparams``).
        env_spec: the environment's spaces (``PPODataModule.env_spec``).
        rank, world_size: this process's rank and the number of processes.
        base_seed: the run's seed; rank ``r`` seeds its environments and sampling with ``base_seed + r * num_envs``.
    """

    settings: dict[str, Any]
    env_spec: dict[str, Any]
    rank: int = 0
    world_size: int = 1
    base_seed: int = 0

    @property
    def seed(self) -> int:
        return self.base_seed + self.rank * self.settings["num_envs"]

    @property
    def steps_per_iteration(self) -> int:
        """Environment steps of one rollout across all ranks."""
        return self.settings["num_envs"] * self.settings["num_steps"] * self.world_size

    @property
    def num_iterations(self) -> int:
        """Rollouts in the budget ``total_timesteps`` of a run from the start (a resume with another rollout size
        counts on from its checkpoint's environment steps: :class:`RolloutDataset`)."""
        return self.settings["total_timesteps"] // self.steps_per_iteration

    def mask_reader(self) -> Optional[ActionMaskReader]:
        source = self.settings.get("action_masks")
        if source is None:
            return None
        return ActionMaskReader(spec_from_dict(self.env_spec["action"]), source, self.settings["env_id"], self.rank)

    def check_sequence_minibatches(self) -> None:
        """A recurrent policy learns from whole environment sequences: a minibatch is a group of environments."""
        s = self.settings
        envs_per_minibatch, rest = divmod(s["minibatch_size"], s["num_steps"])
        if rest or envs_per_minibatch == 0 or s["num_envs"] % envs_per_minibatch:
            options = [k * s["num_steps"] for k in range(1, s["num_envs"] + 1) if s["num_envs"] % k == 0]
            raise ConfigError(
                f"data.minibatch_size: with model.recurrent a minibatch is the whole rollouts of some environments, so "
                f"it must be data.num_steps ({s['num_steps']}) times a divisor of data.num_envs ({s['num_envs']}), "
                f"i.e. one of {options}; got {s['minibatch_size']}."
            )

    def check_recompute(self) -> None:
        """Recomputed advantages need each sample's value alone; a recurrent value depends on the whole sequence."""
        if self.settings.get("recompute_advantages"):
            raise ConfigError("data.recompute_advantages: not available with a recurrent policy (model.recurrent), "
                              "whose values would have to be replayed over whole sequences; set it to false.")

    def build(self, placement, first_failure: Optional[Callable[[Optional[str]], Optional[str]]] = None,
              policy_lag: int = 0) -> RolloutDataset:
        """The rollout stream, acting with what ``placement`` (:class:`lit_ppo.collection.acting.PolicyPlacement`) gives,
        ``policy_lag`` updates behind the learner (:class:`RolloutDataset`)."""
        s = self.settings
        state_size = placement.policy.state_size
        # a rollout acted one version behind with the critic's targets scaled gets its advantages from the learner's
        # critic before its first pass (lit_ppo.learning.decoupled): it needs the trace, as recomputing does
        lagged_scaling = bool(policy_lag and self.env_spec["return_scaling"])
        if state_size:
            self.check_sequence_minibatches()
            self.check_recompute()
            if lagged_scaling:
                raise ConfigError("data.overlap: with data.return_scaling (the default unless data.normalize_reward is "
                                  "set) an overlapped rollout's advantages are recomputed by the learner's critic, "
                                  "which a recurrent policy (model.recurrent) cannot do value by value; set "
                                  "data.normalize_reward: true (rewards scaled instead) or data.overlap: false.")
        stagger = ((self.rank * s["num_envs"], self.world_size * s["num_envs"])
                   if staggered(s.get("stagger_episodes"), s["vectorization"]) else None)
        envs = make_vector_env(s["env_id"], s["num_envs"], s["vectorization"], s["env_kwargs"], s["wrappers"],
                               seed=self.seed, stagger=stagger)
        collector = RolloutCollector(
            envs, s["num_steps"], s["gamma"], s["gae_lambda"], self.seed, torch.Generator().manual_seed(self.seed),
            env_id=s["env_id"], rank=self.rank, normalize_reward=self.env_spec["normalize_reward"],
            return_scaling=self.env_spec["return_scaling"],  # as resolved from the settings' nulls
            action_masks=self.mask_reader(), state_size=state_size,
            keep_trace=bool(s.get("recompute_advantages")) or lagged_scaling,
        )
        return RolloutDataset(collector, placement, s["update_epochs"], s["minibatch_size"], self.steps_per_iteration,
                              s["total_timesteps"], first_failure, sequences=state_size > 0, policy_lag=policy_lag,
                              recompute_advantages=bool(s.get("recompute_advantages")))
