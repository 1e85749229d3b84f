"""What a NaN/inf does to training (``model.on_nonfinite``): stop with an error that names the iteration, the
quantity and, where the rollout shows one, the cause; or skip the minibatch's update, said every rollout it
happens in, and stop once whole rollouts have been skipped ``max_skipped_rollouts`` times in a row.

Every decision is taken by all processes together (a reduction across ranks), so that under DDP every rank
calls backward the same number of times and every rank stops at the same iteration.
"""

from collections.abc import Sequence
from typing import Any

import torch
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor

from lit_ppo.errors import NonFiniteError
from lit_ppo.learning.losses import LOSS_NAMES

MODES = ("stop", "skip")


class NonFiniteGuard:
    """Args:
        mode: ``stop`` (check once per rollout: no host sync per update) or ``skip`` (check every update).
        max_skipped_rollouts: with ``skip``, stop after this many consecutive rollouts whose every update was
            skipped: a persistent fault, not a stray NaN.
    """

    def __init__(self, mode: str = "stop", max_skipped_rollouts: int = 3) -> None:
        self.mode, self.max_skipped_rollouts = mode, max_skipped_rollouts
        self.skipped_in_a_row = 0

    def skip(self, terms: Tensor, strategy: Any) -> bool:
        """Whether to drop this update (``skip`` mode and a non-finite loss term on any rank)."""
        if self.mode != "skip":
            return False
        return bool(strategy.reduce_boolean_decision(not bool(torch.isfinite(terms).all()), all=False))

    def check_rollout(self, sums: Tensor, parameters: Sequence[Tensor], updates: int, skipped: int,
                      nonfinite_inputs: Sequence[str], strategy: Any, iteration: int, global_step: int) -> None:
        """After a rollout's updates, before anything of it can reach a checkpoint: raise a
        :class:`NonFiniteError` if a loss term or the parameters are non-finite, or if too many whole rollouts were
        skipped; warn about this rollout's skipped updates."""
        sums = strategy.reduce(sums, reduce_op="sum")
        params_ok = torch.stack([p.sum() for p in parameters]).isfinite().all()
        finite = torch.cat([sums.isfinite(), params_ok.view(1)]).tolist()  # one host sync
        if not all(finite):
            terms = [name for name, ok in zip(LOSS_NAMES, finite) if not ok]
            what = ", ".join(terms) if terms else "the parameters after an update (a gradient overflowed)"
            raise NonFiniteError(
                f"non-finite values at iteration {iteration} (global step {global_step}): {what}"
                f"{self._cause(nonfinite_inputs, strategy)}. Training stopped; the last checkpoint saved before this "
                "iteration is unchanged. Look for NaN/inf rewards or observations (try data.normalize_reward / "
                "normalize_obs), or lower model.lr; model.on_nonfinite=skip drops such minibatches instead of "
                "stopping.", every_rank=True)
        if not skipped:
            self.skipped_in_a_row = 0
            return
        cause = self._cause(nonfinite_inputs, strategy)
        self.skipped_in_a_row = self.skipped_in_a_row + 1 if updates == 0 else 0
        if self.skipped_in_a_row >= self.max_skipped_rollouts:
            raise NonFiniteError(
                f"every update of the last {self.skipped_in_a_row} rollouts was skipped (non-finite loss) at "
                f"iteration {iteration}{cause}: training cannot go on. Training stopped; the last checkpoint saved "
                "before this iteration is unchanged. Fix the environment's outputs (or try data.normalize_reward / "
                "normalize_obs, a lower model.lr); model.max_skipped_rollouts sets how many such rollouts are "
                "tolerated.", every_rank=True)
        rank_zero_warn(f"lit_ppo: iteration {iteration}: {skipped} of {updates + skipped} updates skipped "
                       f"(non-finite loss){cause}.")

    @staticmethod
    def _cause(nonfinite_inputs: Sequence[str], strategy: Any) -> str:
        """``", caused by non-finite rewards in the rollout"``-style text from every rank's rollout, or ``""``."""
        names = set(nonfinite_inputs)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            gathered: list[Any] = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(gathered, list(nonfinite_inputs))  # a failing path only
            names = {name for rank in gathered for name in rank}
        if not names:
            return ""
        return f"; the rollout's {' and '.join(sorted(names))} were non-finite (from the environment)"

    def state_dict(self) -> dict[str, int]:
        return {"skipped_in_a_row": self.skipped_in_a_row}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.skipped_in_a_row = int(state.get("skipped_in_a_row", 0))
