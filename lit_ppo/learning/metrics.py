"""A rollout's metrics: the window of recent episodes they report, and writing them to every logger in one call
(through ``self.log`` only what a callback reads)."""

from collections import deque
from dataclasses import dataclass
from typing import Any, Optional

import lightning as L
import torch
from torch import Tensor, nn
from torchmetrics import MeanMetric

from lit_ppo.collection.rollout import Rollout
from lit_ppo.learning.progress_bar import EnvStepProgressBar
from lit_ppo.learning.decoupled import lag_kl, truncated_share
from lit_ppo.learning.losses import LOSS_NAMES

PROGRESS_METRICS = ("rollout/return_mean", "time/env_steps", "time/sps")  # what a progress bar shows


@dataclass
class UpdateSummary:
    """What one rollout's updates leave for its logging (``training_step`` -> ``on_train_epoch_end``)."""

    rollout: Rollout
    sums: Tensor  # the loss terms summed over the applied updates, in LOSS_NAMES order
    updates: int  # optimizer steps applied
    skipped: int  # minibatches skipped (on_nonfinite: skip)
    lr: float
    clip_coef: float
    learn_ms: float
    max_weight: Optional[float] = None  # decoupled PPO's truncation of its importance weights
    agents: Optional[list[str]] = None  # several agents: the names the vector env's rows repeat, in order

    def agent_returns(self) -> dict[str, float]:
        """``agents/<name>/return_mean``: the mean return of each agent's episodes that ended in this rollout (this
        process's; an agent with none is left out); ``agents/team_return_mean``: the mean over the copies' episodes
        that ended in it of their agents' returns summed (the team's return, what a cooperative task maximizes)."""
        rollout, n = self.rollout, len(self.agents)
        agent = rollout.episode_rows % n
        returns = {f"agents/{name}/return_mean": float(rollout.episode_returns[agent == i].mean())
                   for i, name in enumerate(self.agents) if bool((agent == i).any())}
        if rollout.team_returns.numel():  # the copies' episodes that ended: their agents' returns summed
            returns["agents/team_return_mean"] = float(rollout.team_returns.mean())
        return returns

    def mean_terms(self) -> Tensor:
        """The loss terms' means over the applied updates (NaN when none was applied)."""
        return self.sums / self.updates if self.updates else torch.full_like(self.sums, float("nan"))

    def metrics(self, losses: Tensor, updates: bool = False, skipped: bool = False) -> dict[str, float]:
        """The update's metrics from ``losses`` (:meth:`mean_terms` reduced over ranks), the rollout's statistics and
        timings; ``stats/updates`` and ``stats/skipped_updates`` where asked for."""
        metrics = dict(zip(LOSS_NAMES, losses.tolist()))
        metrics.update({"stats/explained_variance": self.rollout.explained_variance, "stats/clip_coef": self.clip_coef,
                        "stats/lr": self.lr, **{f"time/{key}": value for key, value in self.rollout.timings.items()},
                        "time/learn_ms": self.learn_ms})
        if self.rollout.importance_weights.numel() or self.rollout.proximal_logprobs.numel():
            metrics["stats/lag_kl"] = lag_kl(self.rollout)
        if self.rollout.importance_weights.numel():
            if self.max_weight is not None:
                metrics["stats/truncated_weights"] = truncated_share(self.rollout, self.max_weight)
        if self.agents:
            metrics.update(self.agent_returns())
        if updates:
            metrics["stats/updates"] = float(self.updates)
        if skipped:
            metrics["stats/skipped_updates"] = float(self.skipped)
        return metrics


class RecentEpisodes(nn.Module):
    """Each process's last ``size`` finished training episodes (``rollout/return_mean`` and ``length_mean``, as
    SB3's ``ep_rew_mean``); torchmetrics reduces their means across processes. A submodule of the LightningModule,
    so the metrics follow it to its device; the windows themselves travel in checkpoints (:meth:`state`)."""

    def __init__(self, size: int = 100) -> None:
        super().__init__()
        self.returns: deque = deque(maxlen=size)
        self.lengths: deque = deque(maxlen=size)
        self.return_mean, self.length_mean = MeanMetric(), MeanMetric()

    def add(self, returns: Tensor, lengths: Tensor) -> None:
        self.returns.extend(returns.tolist())
        self.lengths.extend(lengths.tolist())

    def means(self, device: torch.device) -> tuple[float, float]:
        """Means over every process's window (``nan`` before the first episode ends); a collective call."""
        out = []
        for metric, window in ((self.return_mean, self.returns), (self.length_mean, self.lengths)):
            metric.update(torch.tensor(list(window), dtype=torch.float32, device=device))
            out.append(float(metric.compute()))
            metric.reset()
        return out[0], out[1]

    def state(self, world_size: int = 1) -> list[dict[str, list]]:
        """Every process's window, in rank order (a collective call with several processes: the checkpoint is
        written by rank 0)."""
        window = {"returns": list(self.returns), "lengths": list(self.lengths)}
        if world_size == 1:
            return [window]
        gathered: list[Any] = [None] * world_size
        torch.distributed.all_gather_object(gathered, window)
        return gathered

    def load(self, states: list[dict[str, list]], rank: int) -> None:
        if rank < len(states):  # a process the checkpoint did not have starts with an empty window
            self.returns.extend(states[rank]["returns"])
            self.lengths.extend(states[rank]["lengths"])


class RolloutLogging:
    """Per-rollout logging in two parts, both Lightning's public API:

    - every metric goes to every logger (``trainer.loggers``) in one ``Logger.log_metrics`` call, at step
      ``time/env_steps`` (environment steps of all processes so far: the one step axis of everything lit_ppo logs);
    - the metrics a callback reads from ``trainer.callback_metrics`` (any callback's ``monitor``, e.g.
      ``ModelCheckpoint`` or ``EarlyStopping``; the progress metrics when a progress bar other than lit_ppo's
      shows them) also go through ``LightningModule.log_dict``, without reaching the loggers a second time.

    Why not ``self.log`` for all of them: in Lightning 2.6.6 each ``self.log`` call moves its stored result to the
    value's device through ``apply_to_collection``, ~0.4-0.6 ms per key. Measured on this project's 2-core Xeon
    (``python benchmarks/archive/logging_cost.py``): 25 keys per rollout through ``self.log_dict`` 9.6 ms, through one
    ``log_metrics`` 0.013 ms. An RL-Zoo CartPole rollout takes ~25 ms in all.
    """

    def __init__(self) -> None:
        self.callback_keys: set[str] = set()

    def attach(self, trainer: "L.Trainer") -> None:
        """Find the keys the callbacks of ``trainer`` read (called at the start of each fit)."""
        keys = {monitor for cb in trainer.callbacks if isinstance(monitor := getattr(cb, "monitor", None), str)}
        bar = trainer.progress_bar_callback
        if bar is not None and not isinstance(bar, EnvStepProgressBar):
            keys.update(PROGRESS_METRICS)
        self.callback_keys = keys

    def write(self, module: "L.LightningModule", metrics: dict[str, Any]) -> None:
        step = int(metrics["time/env_steps"])
        for logger in module.loggers:
            logger.log_metrics(metrics, step=step)
        read = {key: metrics[key] for key in self.callback_keys if key in metrics}
        if read:
            module.log_dict(read, logger=False, prog_bar=True)
            # A callback's "{step}" (e.g. in ModelCheckpoint's filename) is on the same axis.
            module.log("step", float(step), logger=False)
