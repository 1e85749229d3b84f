"""The LightningModule: the actor-critic, the PPO update, and per-rollout logging.

Per optimizer step it only computes the loss (Lightning does backward, gradient clipping and the step);
diagnostics are summed on the device and logged once per rollout, at epoch end, so no step waits on a
host-device sync or a logger write.
"""

import copy
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Optional

import lightning as L
import torch
from torch import Tensor
from torchmetrics import MeanMetric

from lit_ppo.errors import ConfigError, require
from lit_ppo.losses import normalize_advantages, ppo_loss_terms
from lit_ppo.networks import ActorCritic

PROGRESS_METRICS = ("rollout/return_mean", "time/env_steps", "time/sps")
LOSS_NAMES = ("losses/policy", "losses/value", "losses/entropy", "stats/approx_kl", "stats/clip_fraction")


class PPOModule(L.LightningModule):
    """PPO's clipped objective on an actor-critic.

    Args:
        env_spec: observation shape and action space; filled in from the data module by the CLI
            (``PPODataModule.env_spec``), so the config never repeats them.
        hidden_sizes: hidden layers of the actor and of the critic MLP.
        lr: Adam learning rate (eps 1e-5).
        anneal_lr: anneal the learning rate linearly to 0 over the iterations of the budget.
        clip_coef: PPO's ratio clip epsilon.
        anneal_clip: anneal ``clip_coef`` linearly to 0 as well (RL-Zoo's CartPole setting).
        clip_vloss: clip the value update around the rollout's values with ``clip_coef``.
        vf_coef: weight of the value loss.
        ent_coef: weight of the entropy bonus.
        norm_adv: normalize advantages per minibatch.
        target_kl: stop a rollout's remaining updates once approx KL exceeds ``1.5 * target_kl`` (None: off).
    """

    def __init__(
        self,
        env_spec: Optional[dict[str, Any]] = None,
        hidden_sizes: Sequence[int] = (64, 64),
        lr: float = 2.5e-4,
        anneal_lr: bool = True,
        clip_coef: float = 0.2,
        anneal_clip: bool = False,
        clip_vloss: bool = False,
        vf_coef: float = 0.5,
        ent_coef: float = 0.01,
        norm_adv: bool = True,
        target_kl: Optional[float] = None,
    ) -> None:
        super().__init__()
        if env_spec is None:
            raise ConfigError("model.env_spec: missing; pass PPODataModule(...).env_spec (the CLI links it for you).")
        require(lr > 0, "model.lr", f"must be positive, got {lr}.")
        require(clip_coef > 0, "model.clip_coef", f"must be positive (PPO's clip epsilon, e.g. 0.2), got {clip_coef}.")
        require(vf_coef >= 0, "model.vf_coef", f"must be >= 0, got {vf_coef}.")
        require(ent_coef >= 0, "model.ent_coef", f"must be >= 0, got {ent_coef}.")
        require(len(hidden_sizes) > 0 and all(h > 0 for h in hidden_sizes), "model.hidden_sizes",
                f"must be positive layer widths, got {list(hidden_sizes)}.")
        require(target_kl is None or target_kl > 0, "model.target_kl", f"must be positive or null, got {target_kl}.")
        self.save_hyperparameters()
        self.policy = ActorCritic(env_spec["observation_shape"], env_spec["action"], list(hidden_sizes))
        # Running means over the last 100 finished training episodes of each rank (as SB3's ep_rew_mean);
        # torchmetrics reduces them across ranks when logged.
        self.episode_return = MeanMetric()
        self.episode_length = MeanMetric()
        self.recent_returns: deque = deque(maxlen=100)
        self.recent_lengths: deque = deque(maxlen=100)
        self._actor: Optional[ActorCritic] = None  # CPU copy for acting when the learner is elsewhere
        self.clip_coef = clip_coef
        self._loss_sums: Optional[Tensor] = None
        self._updates = 0
        self._fit_start = 0.0
        self._fit_start_steps = 0

    def __setattr__(self, name: str, value: Any) -> None:
        # Lightning sets `_current_fx_name` twice per hook call, ~50 times per optimizer step; going through
        # nn.Module.__setattr__ (~4 us each) would cost a fifth of a CartPole PPO update.
        if name == "_current_fx_name":
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    # -- acting -------------------------------------------------------------------------------------------------
    def acting_policy(self) -> ActorCritic:
        """The policy the CPU rollout acts with, holding the weights of the latest update.

        On a CPU learner this is the learner itself (nothing to copy); otherwise a CPU copy refreshed once per
        rollout.
        """
        if self.device.type == "cpu":
            return self.policy
        if self._actor is None:
            self._actor = copy.deepcopy(self.policy).cpu()
        self._actor.load_state_dict(self.policy.state_dict())
        return self._actor

    # -- learning -----------------------------------------------------------------------------------------------
    @property
    def _data(self):
        return self.trainer.datamodule

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        # Minibatches are flat dicts of CPU tensors: nothing to move for a CPU learner, and for an accelerator
        # one non-blocking copy per tensor out of pinned memory (the DataLoader pins them).
        if device.type == "cpu":
            return batch
        return {key: value.to(device, non_blocking=True) for key, value in batch.items()}

    def on_train_start(self) -> None:
        self._fit_start = time.perf_counter()
        self._fit_start_steps = self.current_epoch * self._data.steps_per_iteration

    def on_train_epoch_start(self) -> None:
        frac = 1.0 - self.current_epoch / max(self._data.num_iterations, 1)
        self.clip_coef = self.hparams.clip_coef * (frac if self.hparams.anneal_clip else 1.0)
        self._loss_sums = torch.zeros(len(LOSS_NAMES), device=self.device)
        self._updates = 0

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        hp = self.hparams
        logprob, entropy, values = self.policy.evaluate(batch["obs"], batch["actions"])
        advantages = batch["advantages"]
        if hp.norm_adv:
            advantages = normalize_advantages(advantages.float())
        terms = ppo_loss_terms(
            logprob, batch["logprobs"], advantages, entropy, values, batch["values"], batch["returns"],
            clip_coef=self.clip_coef, value_clip_coef=self.clip_coef if hp.clip_vloss else None,
        )
        loss = terms.policy - hp.ent_coef * terms.entropy + hp.vf_coef * terms.value
        self._loss_sums += torch.stack([t.detach() for t in terms])
        self._updates += 1
        return loss

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> Optional[int]:
        # Optional early stop of a rollout's updates on a KL jump (costs one host sync per step when on).
        target_kl = self.hparams.target_kl
        if target_kl is not None and self._updates > 0:
            kl = self.trainer.strategy.reduce(self._last_kl(), reduce_op="mean")
            if kl > 1.5 * target_kl:
                return -1
        return None

    def _last_kl(self) -> Tensor:
        # Mean approx KL of this rollout's updates so far.
        return self._loss_sums[LOSS_NAMES.index("stats/approx_kl")] / self._updates

    def on_train_epoch_end(self) -> None:
        """Log this rollout once: one reduction across ranks, then one write per logger."""
        dataset = self._data.train_dataset
        stats = dataset.last_stats
        self.recent_returns.extend(stats.episode_returns)
        self.recent_lengths.extend(stats.episode_lengths)
        self.episode_return.update(torch.tensor(list(self.recent_returns), dtype=torch.float32))
        self.episode_length.update(torch.tensor(list(self.recent_lengths), dtype=torch.float32))
        episode_return, episode_length = self.episode_return.compute(), self.episode_length.compute()
        self.episode_return.reset()
        self.episode_length.reset()
        losses = self.trainer.strategy.reduce(self._loss_sums / max(self._updates, 1), reduce_op="mean")
        env_steps = (self.current_epoch + 1) * self._data.steps_per_iteration  # all ranks together
        elapsed = time.perf_counter() - self._fit_start
        metrics = dict(zip(LOSS_NAMES, losses.tolist()))
        metrics.update({
            "stats/explained_variance": dataset.last_explained_variance,
            "stats/clip_coef": self.clip_coef,
            "stats/lr": self.optimizers().param_groups[0]["lr"],
            "rollout/return_mean": float(episode_return),
            "rollout/length_mean": float(episode_length),
            "time/env_steps": float(env_steps),
            "time/sps": (env_steps - self._fit_start_steps) / max(elapsed, 1e-9),
            "time/elapsed_s": elapsed,
            "time/env_ms": stats.env_ms,
            "time/act_ms": stats.act_ms,
            "time/gae_ms": stats.gae_ms,
        })
        # Lightning's self.log costs ~0.5 ms per key (each call moves its result collection), as much as a
        # whole PPO update: loggers get the dict in one write, and self.log carries only what callbacks
        # (checkpoint monitors) and the progress bar read.
        for logger in self.loggers:
            logger.log_metrics(metrics, step=self.global_step)
        self.log_dict({key: metrics[key] for key in PROGRESS_METRICS}, logger=False, prog_bar=True)

    def build_optimizer(self) -> torch.optim.Optimizer:
        # Fused Adam: one kernel for all parameters, ~4x faster than the CPU default for a small MLP.
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr, eps=1e-5, fused=True)

    def configure_optimizers(self):
        optimizer = self.build_optimizer()
        if not self.hparams.anneal_lr:
            return optimizer
        iterations = max(self._data.num_iterations, 1)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: max(1.0 - epoch / iterations, 0.0))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "epoch"}}

    # -- evaluation (validate / test) ---------------------------------------------------------------------------
    def _log_evaluation(self, batch: dict[str, Tensor]) -> None:
        returns = self.all_gather(batch["returns"].to(self.device)).flatten().float()
        lengths = self.all_gather(batch["lengths"].to(self.device)).flatten().float()
        self.log_dict(
            {"eval/return_mean": returns.mean(), "eval/return_std": returns.std(unbiased=False),
             "eval/length_mean": lengths.mean()},
            prog_bar=True, batch_size=returns.numel(),
        )

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._log_evaluation(batch)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._log_evaluation(batch)
