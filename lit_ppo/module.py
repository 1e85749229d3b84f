"""The LightningModule: the actor-critic, the PPO update, and per-rollout logging.

One Lightning step is one rollout: ``training_step`` runs PPO's ``update_epochs`` passes of minibatch updates
with manual optimization (``manual_backward`` and the Lightning optimizer's ``step``, so precision plugins,
strategies and optimizer hooks still apply). PPO takes ~20 tiny optimizer steps per rollout, and Lightning's
per-batch loop costs about as much as one of them: running it once per rollout instead of once per minibatch
is what keeps the Trainer within a few percent of a plain loop. Where nothing would use Lightning's dispatch
around backward and the optimizer step (see ``_update_is_plain``), the loop makes those calls itself.
Diagnostics are summed on the device and logged once per rollout, at epoch end, so no step waits on a
host-device sync or a logger write.
"""

import time
from collections.abc import Sequence
from typing import Any, Optional

import lightning as L
from lightning.fabric.utilities.apply_func import move_data_to_device
from lightning.pytorch.core.optimizer import LightningOptimizer
from lightning.pytorch.plugins.precision import Precision
from lightning.pytorch.profilers import PassThroughProfiler
from lightning.pytorch.strategies import SingleDeviceStrategy
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.model_helpers import is_overridden
import torch
from torch import Tensor
from torchmetrics import MeanMetric

from lit_ppo.acting import ACTOR_DEVICES, DeviceActor, FusedActing, choose_actor_device, cpu_copy
from lit_ppo.callbacks import EnvStepProgressBar
from lit_ppo.checkpointing import SaveLastOnStop, check_compatible
from lit_ppo.errors import ConfigError, NonFiniteError, require
from lit_ppo.losses import normalize_advantages, ppo_loss_terms
from lit_ppo.networks import ActorCritic

PROGRESS_METRICS = ("rollout/return_mean", "time/env_steps", "time/sps")  # for a progress bar
LOSS_NAMES = ("losses/policy", "losses/value", "losses/entropy", "stats/approx_kl", "stats/clip_fraction")


class PPOModule(L.LightningModule):
    """PPO's clipped objective on an actor-critic.

    Args:
        env_spec: observation shape and action space; filled in from the data module by the CLI
            (``PPODataModule.env_spec``), so the config never repeats them.
        hidden_sizes: hidden layers of the actor and of the critic MLP (an image-only observation uses the shared
            Nature-CNN trunk with linear heads instead).
        encoder: ``auto`` (Nature CNN for uint8 images of at least 36x36, MLP otherwise), ``cnn`` or ``mlp``.
        lr: Adam learning rate (eps 1e-5).
        anneal_lr: anneal the learning rate linearly to 0 over the iterations of the budget.
        clip_coef: PPO's ratio clip epsilon.
        anneal_clip: anneal ``clip_coef`` linearly to 0 as well (RL-Zoo's CartPole setting).
        clip_vloss: clip the value update around the rollout's values with ``clip_coef``.
        vf_coef: weight of the value loss.
        ent_coef: weight of the entropy bonus.
        norm_adv: normalize advantages per minibatch.
        target_kl: stop a rollout's remaining updates once approx KL exceeds ``1.5 * target_kl`` (None: off).
        actor_device: where the rollout's policy acts (environments always step on the CPU): ``cpu`` (a CPU copy
            of the learner's weights, refreshed once per rollout), ``learner`` (the learner's network on its
            accelerator: an upload and a download every step), or ``auto`` (measured at start-up at the rollout's
            batch size; the decision and both timings are logged). ``cuda`` means ``learner`` and needs a CUDA
            learner.
        on_nonfinite: what a NaN/inf loss does: ``stop`` training with an error naming the iteration and the loss
            term (checked once per rollout, before any checkpoint of it is saved), or ``skip`` that minibatch's
            update (checked every step, which costs a host-device sync per step on an accelerator).
    """

    def __init__(
        self,
        env_spec: Optional[dict[str, Any]] = None,
        hidden_sizes: Sequence[int] = (64, 64),
        encoder: str = "auto",
        lr: float = 2.5e-4,
        anneal_lr: bool = True,
        clip_coef: float = 0.2,
        anneal_clip: bool = False,
        clip_vloss: bool = False,
        vf_coef: float = 0.5,
        ent_coef: float = 0.01,
        norm_adv: bool = True,
        target_kl: Optional[float] = None,
        actor_device: str = "cpu",
        on_nonfinite: str = "stop",
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
        require(actor_device in ACTOR_DEVICES, "model.actor_device",
                f"must be one of {ACTOR_DEVICES}, got {actor_device!r}.")
        require(on_nonfinite in ("stop", "skip"), "model.on_nonfinite", f"must be 'stop' or 'skip', got {on_nonfinite!r}.")
        self.save_hyperparameters()
        self.automatic_optimization = False  # several optimizer steps per Lightning step: see the module docstring
        self.policy = ActorCritic.from_env_spec(env_spec, list(hidden_sizes), encoder)
        # Means over each rank's last 100 finished training episodes (kept by its collector); torchmetrics
        # reduces them across ranks.
        self.episode_return = MeanMetric()
        self.episode_length = MeanMetric()
        self._actor: Optional[ActorCritic] = None  # CPU copy for acting when the learner is elsewhere
        self._act_on: Optional[str] = None  # "cpu" or "learner", resolved from actor_device at first use
        self._auto_timings: dict[str, float] = {}
        self.clip_coef = clip_coef
        self._loss_sums: Optional[Tensor] = None
        self._updates = 0
        self._grad_clip: tuple[Optional[float], Optional[str]] = (None, None)  # the Trainer's, see configure_callbacks
        self._skipped = 0
        self._fit_start = 0.0
        self._epoch_start = 0.0
        self._transfer_s = 0.0
        self._fit_start_steps = 0
        self.rollout_metrics: dict[str, float] = {}  # the latest rollout's metrics, as the loggers got them
        self._callback_keys: set[str] = set()  # the metrics that go through self.log, see _keys_callbacks_read
        self._plain_update = False  # see _update_is_plain

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

        On a CPU learner this is the learner's network (nothing to copy); otherwise, by ``actor_device``, a CPU copy
        refreshed once per rollout or the learner's network on its device. On the CPU it acts through
        :class:`lit_ppo.acting.FusedActing` (actor and critic in one pass).
        """
        if self._act_on is None:
            self._act_on = self._resolve_actor_device()
        if self.device.type == "cpu":
            return FusedActing(self.policy)
        if self._act_on == "learner":
            return DeviceActor(self.policy, self.device)
        # Set past nn.Module.__setattr__: the CPU copy must not become a submodule (it would enter the
        # state_dict and checkpoints, and be moved to the learner's device).
        object.__setattr__(self, "_actor", cpu_copy(self.policy, self._actor))
        return FusedActing(self._actor)

    def on_fit_start(self) -> None:
        # The learner is on its device now: an impossible placement fails before any environment step.
        self._act_on = self._resolve_actor_device() if self.hparams.actor_device != "auto" else None

    def _resolve_actor_device(self) -> str:
        choice = self.hparams.actor_device
        if choice == "cuda" and self.device.type != "cuda":  # also caught before the Trainer runs, by the CLI
            raise ConfigError(
                f"model.actor_device: 'cuda' needs a CUDA learner, but the Trainer put the learner on {self.device} "
                f"(CUDA available: {torch.cuda.is_available()}). Use 'cpu' or 'auto', or --trainer.accelerator gpu."
            )
        if choice == "cpu":
            return "cpu"
        if choice in ("learner", "cuda"):
            return "learner"
        dataset = self._data.train_dataset if self._trainer is not None else None
        if dataset is None:  # validate/test: no rollout batch to measure with; evaluation is short
            return "cpu"
        sample = dataset.collector.next_obs
        act_on, cpu_s, dev_s = choose_actor_device(self.policy, self.device, sample)
        rank_zero_info(
            f"lit_ppo: actor_device=auto: acting on a batch of {sample.shape[0]} takes {cpu_s * 1e6:.0f} us on the "
            f"CPU and {dev_s * 1e6:.0f} us on {self.device} (transfers included): acting on "
            f"{'the CPU' if act_on == 'cpu' else self.device}."
        )
        self._auto_timings = {"time/act_cpu_us": cpu_s * 1e6, "time/act_learner_us": dev_s * 1e6}
        return act_on

    # -- learning -----------------------------------------------------------------------------------------------
    @property
    def _data(self):
        return self.trainer.datamodule

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        # A rollout (nested dicts of CPU tensors) crosses once: nothing to move for a CPU learner, and for an
        # accelerator one non-blocking copy per tensor out of pinned memory (the DataLoader pins them).
        if device.type == "cpu":
            return batch
        t0 = time.perf_counter()
        moved = move_data_to_device(batch, device)
        self._transfer_s += time.perf_counter() - t0  # host-side time: the copies themselves overlap
        return moved

    def on_train_start(self) -> None:
        self._fit_start = time.perf_counter()
        self._fit_start_steps = self.current_epoch * self._data.steps_per_iteration
        self._callback_keys = self._keys_callbacks_read()
        self._plain_update = self._update_is_plain()

    def _update_is_plain(self) -> bool:
        """Whether Lightning's ``manual_backward`` and optimizer ``step`` would come down to ``loss.backward()``,
        this module's ``on_before_optimizer_step`` and the torch optimizer's ``step``: one process on one device (no
        DDP reducer), full precision (no loss scaling or unscaling), no profiler, and no callback hooked around
        backward or the optimizer step (nor a module hook around backward). Then the update loop makes those calls
        itself (see ``_plain_step``) and clips with :func:`clip_grad_norm`: Lightning's dispatch of hooks that
        nobody overrides and torch's general-purpose clipping cost ~6% of a CartPole fit."""
        trainer = self.trainer
        backward_hooks = ("on_before_backward", "on_after_backward")
        hooked = any(is_overridden(hook, callback, L.Callback) for callback in trainer.callbacks
                     for hook in (*backward_hooks, "on_before_optimizer_step"))
        hooked = hooked or any(is_overridden(hook, self, L.LightningModule) for hook in (*backward_hooks, "backward"))
        optimizer = self.optimizers()
        steps_counted = hasattr(optimizer, "_on_before_step") and hasattr(optimizer, "_on_after_step")
        return (type(trainer.strategy) is SingleDeviceStrategy and type(trainer.precision_plugin) is Precision
                and isinstance(trainer.profiler, PassThroughProfiler) and isinstance(optimizer, LightningOptimizer)
                and steps_counted and not hooked)

    def _keys_callbacks_read(self) -> set[str]:
        """Metrics some callback reads from Lightning's own collections: any callback's ``monitor`` (checkpoints,
        early stopping), and the progress metrics for a progress bar other than lit_ppo's (which reads
        ``rollout_metrics``). Only these go through ``self.log``: it costs ~0.5 ms per key and rollout (it moves
        Lightning's result collection each call), as much as a PPO update."""
        keys = {monitor for cb in self.trainer.callbacks if isinstance(monitor := getattr(cb, "monitor", None), str)}
        bar = self.trainer.progress_bar_callback
        if bar is not None and not isinstance(bar, EnvStepProgressBar):
            keys.update(PROGRESS_METRICS)
        return keys

    def on_train_epoch_start(self) -> None:
        frac = 1.0 - self.current_epoch / max(self._data.num_iterations, 1)
        self.clip_coef = self.hparams.clip_coef * (frac if self.hparams.anneal_clip else 1.0)
        self._epoch_start = time.perf_counter()
        self._transfer_s = 0.0
        self._loss_sums = torch.zeros(len(LOSS_NAMES), device=self.device)
        self._updates = 0
        self._skipped = 0

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        """One rollout's updates: ``update_epochs`` passes over its minibatches, one optimizer step each."""
        rollout, indices = batch["rollout"], batch["minibatch_indices"]
        optimizer = self.optimizers()
        size = rollout["advantages"].shape[0]
        whole = None  # the rollout as one minibatch: prepared once, it is the same in every pass
        for epoch_indices in indices:
            for idx in epoch_indices:
                if idx.numel() == size:  # no gather: the loss does not depend on the order of the samples
                    whole = whole if whole is not None else self._prepare_minibatch(rollout)
                    minibatch = whole
                else:
                    minibatch = self._prepare_minibatch({key: value[idx] for key, value in rollout.items()})
                loss = self._minibatch_loss(minibatch)
                if loss is None:
                    continue
                optimizer.zero_grad()
                if self._plain_update:
                    loss.backward()
                    self._plain_step(optimizer)
                else:
                    self.manual_backward(loss)
                    optimizer.step()  # clipping happens in on_before_optimizer_step
                if self._kl_exceeded():
                    return

    def _plain_step(self, optimizer: LightningOptimizer) -> None:
        """``optimizer.step()`` where the update is plain: the step counting that Lightning's manual loop attaches
        to the optimizer (it is ``trainer.global_step``), ``on_before_optimizer_step`` (the clipping), the step."""
        optimizer._on_before_step()
        self.on_before_optimizer_step(optimizer.optimizer)
        optimizer.optimizer.step()
        optimizer._on_after_step()

    def _prepare_minibatch(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        if self.hparams.norm_adv:  # per minibatch, as PPO's reference implementations do
            batch = dict(batch, advantages=normalize_advantages(batch["advantages"].float()))
        return batch

    def _minibatch_loss(self, batch: dict[str, Tensor]) -> Optional[Tensor]:
        hp = self.hparams
        logprob, entropy, values = self.policy.evaluate(batch["obs"], batch["actions"])
        terms = ppo_loss_terms(
            logprob, batch["logprobs"], batch["advantages"], entropy, values, batch["values"], batch["returns"],
            clip_coef=self.clip_coef, value_clip_coef=self.clip_coef if hp.clip_vloss else None,
        )
        stacked = torch.stack([t.detach() for t in terms])
        if hp.on_nonfinite == "skip" and not bool(torch.isfinite(stacked).all()):
            self._skipped += 1
            return None
        # No sync here: a non-finite term carries into the rollout's sums, checked once in on_train_epoch_end.
        self._loss_sums += stacked
        self._updates += 1
        loss = terms.policy + hp.vf_coef * terms.value
        if hp.ent_coef:  # with no bonus, backward does not go through the entropy at all
            loss = loss - hp.ent_coef * terms.entropy
        return loss

    def _kl_exceeded(self) -> bool:
        # Optional early stop of a rollout's updates on a KL jump (one host sync per step when on).
        target_kl = self.hparams.target_kl
        if target_kl is None:
            return False
        mean_kl = self._loss_sums[LOSS_NAMES.index("stats/approx_kl")] / self._updates
        return bool(self.trainer.strategy.reduce(mean_kl, reduce_op="mean") > 1.5 * target_kl)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        # Lightning calls this after the mixed-precision unscale (and after DDP's gradient averaging), so the
        # Trainer's clip value means what it means under automatic optimization.
        value, algorithm = self._grad_clip
        if not value:
            return
        if self._plain_update and algorithm == "norm":  # what Lightning's full-precision plugin would do, directly
            clip_grad_norm([p for group in optimizer.param_groups for p in group["params"]], value)
        else:
            self.clip_gradients(optimizer, gradient_clip_val=value, gradient_clip_algorithm=algorithm)

    def _update_normalization(self, collector) -> None:
        # Once per rollout, after its updates, so that acting on a rollout and learning from it use the same
        # statistics. Pooled over ranks: every rank merges the same numbers and the policies stay identical.
        def reduce_sum(t: Tensor) -> Tensor:
            return self.trainer.strategy.reduce(t, reduce_op="sum")

        obs, returns = collector.buffers["obs"].flatten(0, 1), collector.reward_returns.flatten()
        self.policy.update_normalization(obs, returns, reduce_sum)

    def _check_finite(self) -> None:
        """Stop before this rollout's state can reach a checkpoint if any update was non-finite."""
        sums = self.trainer.strategy.reduce(self._loss_sums, reduce_op="sum")
        params_ok = torch.stack([p.sum() for p in self.policy.parameters()]).isfinite().all()
        finite = torch.cat([sums.isfinite(), params_ok.view(1)]).tolist()  # one host sync
        if all(finite):
            return
        terms = [name for name, ok in zip(LOSS_NAMES, finite) if not ok]
        what = ", ".join(terms) if terms else "the parameters after an update (a gradient overflowed)"
        raise NonFiniteError(
            f"non-finite values at iteration {self.current_epoch + 1} (global step {self.global_step}): {what}. "
            "Training stopped; the last checkpoint saved before this iteration is unchanged. Look for NaN/inf "
            "rewards or observations (try data.normalize_reward / normalize_obs), or lower model.lr; "
            "model.on_nonfinite=skip drops such minibatches instead of stopping."
        )

    def on_train_epoch_end(self) -> None:
        """Log this rollout once: one reduction across ranks, then one write per logger."""
        self._check_finite()
        dataset = self._data.train_dataset
        self._update_normalization(dataset.collector)
        stats, collector = dataset.last_stats, dataset.collector
        for metric, values in ((self.episode_return, collector.recent_returns),
                               (self.episode_length, collector.recent_lengths)):
            metric.update(torch.tensor(list(values), dtype=torch.float32, device=self.device))
        episode_return, episode_length = self.episode_return.compute(), self.episode_length.compute()
        self.episode_return.reset()
        self.episode_length.reset()
        losses = self.trainer.strategy.reduce(self._loss_sums / max(self._updates, 1), reduce_op="mean")
        epoch_ms = (time.perf_counter() - self._epoch_start) * 1e3  # after the reduction: the learner's work is done
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
            # Phases of this iteration; the learner's share is what the rest of the epoch took.
            "time/env_ms": stats.env_ms,
            "time/act_ms": stats.act_ms,
            "time/gae_ms": stats.gae_ms,
            "time/sync_ms": stats.sync_ms,
            "time/transfer_ms": self._transfer_s * 1e3,
            "time/learn_ms": epoch_ms - stats.collect_ms - stats.sync_ms - self._transfer_s * 1e3,
            "time/iteration_ms": epoch_ms,
        })
        if self.hparams.on_nonfinite == "skip":
            metrics["stats/skipped_updates"] = float(self._skipped)
        metrics.update(self._auto_timings)  # once: actor_device=auto's start-up measurement
        self._auto_timings = {}
        # Loggers get the dict in one write; self.log carries only what callbacks read (see _keys_callbacks_read).
        for logger in self.loggers:
            logger.log_metrics(metrics, step=self.global_step)
        self.rollout_metrics = metrics
        logged = {key: metrics[key] for key in self._callback_keys if key in metrics}
        if logged:
            self.log_dict(logged, logger=False, prog_bar=True)
        scheduler = self.lr_schedulers()
        if scheduler is not None:  # manual optimization: stepped here, once per rollout, after logging its lr
            scheduler.step()

    # -- checkpoints ------------------------------------------------------------------------------------------
    def configure_callbacks(self):
        callbacks = [SaveLastOnStop()]
        handback = self._adopt_trainer_clipping()
        return callbacks + [handback] if handback else callbacks

    def _adopt_trainer_clipping(self) -> Optional[L.Callback]:
        """Take ``Trainer(gradient_clip_val=..., gradient_clip_algorithm=...)`` as this module's clipping, and
        return the callback that hands it back when the fit ends or raises.

        Lightning refuses the Trainer's clipping under manual optimization (it cannot know where the steps are);
        lit_ppo applies the same setting itself before every optimizer step (``on_before_optimizer_step``), so
        ``trainer.gradient_clip_val`` keeps its meaning. Lightning calls this hook before it checks the setting.
        """
        trainer = self.trainer
        if trainer.state.fn != "fit":
            return None
        if not trainer.gradient_clip_val:  # this fit clips nothing, whatever an earlier Trainer asked
            self._grad_clip = (None, None)
            return None
        setting = (trainer.gradient_clip_val, trainer.gradient_clip_algorithm)
        self._grad_clip = (float(setting[0]), setting[1] or "norm")
        trainer.gradient_clip_val = trainer.gradient_clip_algorithm = None
        return _HandBackClipping(setting)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Runs before the weights are loaded: a mismatch is named here instead of as a state_dict size error.
        check_compatible(checkpoint.get("hyper_parameters", {}), dict(self.hparams))

    def build_optimizer(self) -> torch.optim.Optimizer:
        # Fused Adam (one kernel for all parameters) is ~4x faster than the CPU default for a small MLP, but
        # Lightning refuses gradient clipping with it under mixed precision (it unscales internally): there the
        # multi-tensor implementation is used.
        mixed = self._trainer is not None and "mixed" in str(self.trainer.precision)
        kind = {"foreach": True} if mixed else {"fused": True}
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr, eps=1e-5, **kind)

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

    def predict_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        """The episodes' returns and lengths (played by the predict loader), for a prediction writer."""
        return batch


def clip_grad_norm(params: list[Tensor], max_norm: float) -> None:
    """``torch.nn.utils.clip_grad_norm_(params, max_norm)`` for parameters on one device: the same kernels and
    arithmetic (gradients scaled by ``max_norm / (total 2-norm + 1e-6)`` where that is below 1), without torch's
    regrouping of the tensors by device and dtype, a Python-level cost of ~4% of a CartPole fit."""
    grads = [p.grad for p in params if p.grad is not None]
    if grads:
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        torch._foreach_mul_(grads, (max_norm / (total + 1e-6)).clamp_(max=1.0))


class _HandBackClipping(L.Callback):
    """Gives the Trainer back the clipping setting a PPOModule took over for one fit, when the fit ends and also
    when it raises: a later fit with the same Trainer (a notebook retrying, another module) reads it again."""

    def __init__(self, setting: tuple[Any, Any]) -> None:
        self.setting = setting

    def _hand_back(self, trainer: "L.Trainer") -> None:
        trainer.gradient_clip_val, trainer.gradient_clip_algorithm = self.setting

    def on_fit_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        self._hand_back(trainer)

    def on_exception(self, trainer: "L.Trainer", pl_module: "L.LightningModule", exception: BaseException) -> None:
        self._hand_back(trainer)
