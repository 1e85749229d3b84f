"""The two ``IterableDataset`` s of the data module: the rollout stream of training and deterministic evaluation.

:class:`RolloutDataset` yields one :class:`lit_ppo.collection.rollout.Rollout` per iteration (one Lightning epoch = one rollout
= one Lightning step, see :mod:`lit_ppo.collection.datamodule`); :class:`EvaluationDataset` one evaluation's episodes.
"""

from collections.abc import Callable, Iterator
from typing import Any, Optional

import torch
from torch import Tensor
from torch.utils.data import IterableDataset

from lit_ppo.collection.acting import PolicyPlacement
from lit_ppo.collection.clock import PhaseClock
from lit_ppo.collection.rollout import TIMING_KEYS, Rollout
from lit_ppo.errors import EnvStepError
from lit_ppo.collection.evaluation import evaluate_policy
from lit_ppo.collection.collector import RolloutCollector


class RolloutDataset(IterableDataset):
    """Yields one fresh :class:`lit_ppo.collection.rollout.Rollout` per iteration (see the module docstring).

    Args:
        collector: plays this process's environments.
        placement: gives the policy to act with at each rollout (:class:`lit_ppo.collection.acting.PolicyPlacement`).
        update_epochs, minibatch_size: the update's passes and minibatch size, for ``minibatch_indices``.
        sequences: minibatches of whole environment sequences (a recurrent policy's); ``minibatch_size`` is then a
            multiple of the rollout's ``num_steps``.
        steps_per_iteration: environment steps of one rollout of all processes together.
        total_timesteps: the budget, in environment steps of all processes together. The count goes on from the
            collector's ``env_steps`` (a checkpoint's, on a resume), so a resume with another number of
            environments, steps or processes continues it; the last rollout is the last whole one that fits.
        first_failure: with several processes, makes an environment failure collective: given this process's
            failure message (or None), returns the first failing rank's message on every rank (or None). Every
            rank then stops with the same error instead of waiting in a collective for the one that failed.
        policy_lag: how many updates the acting policy is behind the learner's when the learner takes a rollout: 0
            here, 1 in the overlap's collector process (:mod:`lit_ppo.collection.overlap.dataset`); stamped on each
            rollout.
        recompute_advantages: ``data.recompute_advantages``, stamped on each rollout for the learner.
    """

    def __init__(self, collector: RolloutCollector, placement: PolicyPlacement, update_epochs: int, minibatch_size: int,
                 steps_per_iteration: int, total_timesteps: int,
                 first_failure: Optional[Callable[[Optional[str]], Optional[str]]] = None,
                 sequences: bool = False, policy_lag: int = 0, recompute_advantages: bool = False) -> None:
        self.collector, self.placement, self.first_failure, self.sequences = collector, placement, first_failure, sequences
        self.policy_lag, self.recompute_advantages = policy_lag, recompute_advantages
        self.clock = PhaseClock(*TIMING_KEYS)  # this process's collection phases, one lap per rollout
        self.update_epochs, self.minibatch_size = update_epochs, minibatch_size
        self.steps_per_iteration, self.total_timesteps = steps_per_iteration, total_timesteps
        self.rollout_size = collector.num_steps * collector.num_envs

    def __len__(self) -> int:
        return 1

    @property
    def budget_spent(self) -> bool:
        """No further rollout fits in the budget."""
        return self.collector.env_steps + self.steps_per_iteration > self.total_timesteps

    def minibatch_indices(self) -> Tensor:
        """``update_epochs`` independent permutations of the rollout, split into minibatches; with ``sequences``,
        permutations of the environments, each minibatch a group of them, its row step-major
        (``t * num_envs + env``: see :class:`lit_ppo.collection.rollout.Rollout`)."""
        if not self.sequences:
            orders = [torch.randperm(self.rollout_size, generator=self.collector.generator)
                      for _ in range(self.update_epochs)]
            return torch.stack(orders).view(self.update_epochs, -1, self.minibatch_size)
        steps, num_envs = self.collector.num_steps, self.collector.num_envs
        envs = torch.stack([torch.randperm(num_envs, generator=self.collector.generator)
                            for _ in range(self.update_epochs)])
        envs = envs.view(self.update_epochs, -1, 1, self.minibatch_size // steps)
        rows = torch.arange(steps).view(1, 1, steps, 1) * num_envs + envs  # [epochs, minibatches, steps, envs]
        return rows.flatten(2)

    def _collect(self, policy) -> dict[str, Any]:
        if self.first_failure is None:
            return self.collector.collect(policy, self.clock)
        try:
            data, failure = self.collector.collect(policy, self.clock), None
        except EnvStepError as err:
            data, failure = None, err
        raise_first_failure(failure, self.first_failure)
        return data

    def __iter__(self) -> Iterator[Rollout]:
        before = self.collector.env_steps
        end = budget_end(before, self.steps_per_iteration, self.total_timesteps)
        with self.clock.phase("sync_ms"):
            policy = self.placement.for_rollout(self.collector.next_obs)
        data = self._collect(policy)
        self.collector.env_steps = after = before + self.steps_per_iteration
        yield Rollout(
            **data,
            timings={**self.clock.lap(), **self.placement.take_measurements()},
            policy_lag=self.policy_lag,
            recompute_advantages=self.recompute_advantages,
            minibatch_indices=self.minibatch_indices(),
            env_steps=after,
            budget_fraction=min(before / max(end, 1), 1.0),
            final=after >= end,
        )


    # -- checkpointing (at rollout boundaries) and shutdown ---------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"collector": self.collector.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> Optional[str]:
        """Continue from a checkpoint's ``state``; returns a note when it could not be exact. A state without a
        collector (saved before any rollout of an overlapped run) leaves the fresh environments as they are."""
        if state.get("collector") is None:
            return None
        note = self.collector.load_state_dict(state["collector"])
        if state["collector"].get("env_steps") is None:  # saved before the count was kept: derived as it was then
            self.collector.env_steps = self.collector.iterations * self.steps_per_iteration
        return note

    def restart_at(self, iterations: int, env_steps: Optional[int] = None) -> None:
        """Fresh environments, counted from ``iterations`` rollouts and ``env_steps`` steps of all processes done (a
        rank the checkpoint did not have; None: as many steps as ``iterations`` of this run's rollouts)."""
        self.collector.iterations = iterations
        self.collector.env_steps = iterations * self.steps_per_iteration if env_steps is None else env_steps

    def close(self) -> None:
        self.collector.close()


def budget_end(env_steps: int, steps_per_iteration: int, total_timesteps: int) -> int:
    """The environment steps at which a run that has done ``env_steps`` stops: after the last whole rollout of
    ``steps_per_iteration`` that fits in ``total_timesteps`` (``env_steps`` itself when none fits)."""
    return env_steps + max(total_timesteps - env_steps, 0) // steps_per_iteration * steps_per_iteration


def raise_first_failure(failure: Optional[Exception],
                        first_failure: Optional[Callable[[Optional[str]], Optional[str]]]) -> None:
    """Raise the first failing rank's :class:`EnvStepError` on every rank (``first_failure`` gathers it), or
    ``failure`` itself with one process; nothing when no rank failed."""
    if first_failure is None:
        if failure is not None:
            raise failure
        return
    message = first_failure(None if failure is None else str(failure))
    if message is not None:
        raise EnvStepError(message, every_rank=True) from failure


class EvaluationDataset(IterableDataset):
    """One item: the returns and lengths of ``episodes`` deterministic episodes on fresh environments."""

    def __init__(self, make_envs: Callable[[], Any], acting_policy: Callable[[], Any], episodes: int, seed: int,
                 action_masks: Optional[Any] = None):
        self.make_envs, self.acting_policy, self.episodes, self.seed = make_envs, acting_policy, episodes, seed
        self.action_masks = action_masks

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        envs = self.make_envs()
        try:
            returns, lengths = evaluate_policy(self.acting_policy(), envs, self.episodes, self.seed, self.action_masks)
        finally:
            envs.close()
        yield {"returns": returns, "lengths": lengths}
