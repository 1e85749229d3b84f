"""Which learning rate each update uses: ``model.lr`` as given, annealed over the budget (``model.anneal_lr``), or
adapted to the approx KL (``model.adaptive_lr_kl``) before every minibatch's step or once per rollout
(``model.adaptive_lr_every``). The rate lives in the optimizer's param groups, so an adapted rate is carried from
rollout to rollout and in checkpoints with the optimizer's state; nothing else here has state."""

from typing import Optional

import torch

ADAPTIVE_LR_EVERY = ("minibatch", "rollout")  # when model.adaptive_lr_kl moves the rate
LR_BOUNDS = (1e-5, 1e-2)  # model.adaptive_lr_kl's range for the learning rate (rsl_rl's)


def adapted_lr(lr: float, kl: float, target: float) -> float:
    """rsl_rl's adaptive schedule: the learning rate after an update whose approx KL (before its step) is ``kl``,
    from the one before: divided by 1.5 above twice ``target``, multiplied by 1.5 below half of it (a KL of exactly
    0, the weights that acted, leaves it), kept within ``LR_BOUNDS``."""
    if kl > 2.0 * target:
        return max(LR_BOUNDS[0], lr / 1.5)
    if 0.0 < kl < 0.5 * target:
        return min(LR_BOUNDS[1], lr * 1.5)
    return lr


class LearningRate:
    """Sets the optimizer's rate at the three points of a rollout's updates where it may change.

    Args:
        lr: ``model.lr``, the rate (at the budget's start where annealed).
        anneal: ``model.anneal_lr``: linearly to 0 over the budget.
        adaptive_kl: ``model.adaptive_lr_kl``: the target approx KL (None: not adapted).
        every: ``model.adaptive_lr_every``: ``minibatch`` or ``rollout``.
    """

    def __init__(self, lr: float, anneal: bool = False, adaptive_kl: Optional[float] = None,
                 every: str = "minibatch") -> None:
        self.lr, self.anneal, self.adaptive_kl, self.every = lr, anneal, adaptive_kl, every

    @property
    def needs_each_kl(self) -> bool:
        """Whether each minibatch's KL sets its own step's rate (a host sync per minibatch)."""
        return self.adaptive_kl is not None and self.every == "minibatch"

    def start_rollout(self, optimizer: torch.optim.Optimizer, budget_fraction: float) -> None:
        """Before a rollout's updates: the given or annealed rate; an adapted rate carries over instead."""
        if self.adaptive_kl is None:
            _set(optimizer, self.lr * (1.0 - budget_fraction if self.anneal else 1.0))

    def before_step(self, optimizer: torch.optim.Optimizer, kl: Optional[float]) -> None:
        """Before a minibatch's step, with its KL measured before the step: rsl_rl's per-minibatch rule."""
        if self.needs_each_kl:
            _set(optimizer, adapted_lr(current_lr(optimizer), float(kl), self.adaptive_kl))

    @property
    def adapts_each_rollout(self) -> bool:
        """Whether the KL of a rollout's last minibatch sets the next rollout's rate (one host sync a rollout)."""
        return self.adaptive_kl is not None and self.every == "rollout"

    def end_rollout(self, optimizer: torch.optim.Optimizer, last_kl: float) -> None:
        """After a rollout's updates, with the KL of its last minibatch scored: the next rollout's rate
        (``adaptive_lr_every: rollout``)."""
        if self.adapts_each_rollout:
            _set(optimizer, adapted_lr(current_lr(optimizer), last_kl, self.adaptive_kl))


def current_lr(optimizer: torch.optim.Optimizer) -> float:
    """The rate the optimizer's next step uses (every group holds the same)."""
    return optimizer.param_groups[0]["lr"]


def _set(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
