"""The LightningModule: the actor-critic, the PPO update, and per-rollout logging.

One Lightning step is one rollout (a :class:`lit_ppo.collection.rollout.Rollout`): ``training_step`` runs PPO's
``update_epochs`` passes of minibatch updates with Lightning's manual optimization (``manual_backward``, the
Lightning optimizer's ``step``, gradient clipping with ``self.clip_gradients`` in ``on_before_optimizer_step``),
so precision plugins, strategies and optimizer hooks all apply; Lightning's per-batch loop runs once per rollout,
not once per minibatch (docs/design.md). Everything the module learns and logs comes in the batch.
"""

import dataclasses
import time
from collections.abc import Sequence
from functools import partial
from typing import Any, Optional, Union

import lightning as L
import torch
from torch import Tensor

from lit_ppo.collection.acting import check_actor_device
from lit_ppo.collection.gae import recompute_gae
from lit_ppo.collection.rollout import Rollout
from lit_ppo.collection.teardown import CloseEnvironmentsOnError
from lit_ppo.checkpointing.callbacks import SaveLastOnStop
from lit_ppo.checkpointing.settings import check_compatible
from lit_ppo.classpath import ClassPathConfig
from lit_ppo.learning.decoupled import decouple, in_learner_units, measure_kl_from_learner
from lit_ppo.errors import ConfigError
from lit_ppo.learning.learning_rate import current_lr
from lit_ppo.learning.metrics import RecentEpisodes, RolloutLogging, UpdateSummary
from lit_ppo.learning.objective import PPOObjective, default_ent_coef
from lit_ppo.learning.losses import LOSS_NAMES
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.networks.settings import LOG_STD_INIT
from lit_ppo.learning.nonfinite import NonFiniteGuard
from lit_ppo.learning.settings import PPOSettings

KL_INDEX = LOSS_NAMES.index("stats/approx_kl")
RECENT_EPISODES = 100  # rollout/return_mean is over each process's last 100 finished episodes


class PPOModule(L.LightningModule):
    """PPO's clipped objective on an actor-critic.

    Args:
        env_spec: the environment's spaces (``PPODataModule.env_spec``); the CLI links it from the data module,
            so a config never repeats it.
        hidden_sizes: hidden layers of the actor and of the critic MLP (an image-only observation uses the shared
            Nature-CNN trunk with linear heads instead).
        encoder: ``auto`` (Nature CNN for uint8 images of at least 36x36, MLP otherwise), ``cnn`` or ``mlp``.
        activation: of the MLP's hidden layers: ``tanh`` (PPO's reference choice) or ``relu``.
        network: your own trunk instead of the built-in encoder and MLPs: a class path or ``{class_path: ...,
            init_args: {...}}`` of an ``nn.Module`` that maps an observation batch to ``[batch, features]``; the
            actor and value heads are linear layers on its features.
        recurrent: an LSTM/GRU core before the actor/critic layers, ``{cell: lstm|gru, hidden_size: 128, layers: 1}``
            (``true``: those; :mod:`lit_ppo.networks.recurrent`); minibatches are then whole environment sequences.
        log_std_init: the Gaussian's initial log-std (continuous actions; see :class:`ActorCritic`). -0.5 by default
            (a first std of 0.61, Spinning Up's): with a first std of 1, Ant-v5's and Humanoid-v5's control cost
            outweighs staying alive and the policy learns to fall (``docs/zoo.md``, "Without a config").
        ortho_init: PPO's orthogonal initialization (``false``: PyTorch's default init).
        lr: Adam learning rate (eps 1e-5).
        anneal_lr: anneal the learning rate linearly to 0 over the budget.
        clip_coef: PPO's ratio clip epsilon.
        anneal_clip: anneal ``clip_coef`` linearly to 0 as well (RL-Zoo's CartPole setting).
        clip_vloss: clip the value update around the rollout's values: ``false`` (SB3's default), a range (SB3's
            ``clip_range_vf``) or ``true`` (CleanRL's: ``clip_coef`` as configured); never annealed.
        vf_coef: weight of the value loss.
        ent_coef: entropy bonus weight; ``null`` (the default): 0.01 for Box actions, 0 for discrete
            (:func:`~lit_ppo.learning.objective.default_ent_coef`), which keeps the narrower first Gaussian wide
            until Swimmer-v5 finds its fast stroke (``docs/zoo.md``). 0 from 2026-12-06 to 2026-12-07.
        max_grad_norm: clip the global gradient norm of every update to this (``null``: no clipping).
        norm_adv: normalize advantages per minibatch.
        decoupled: with ``data.overlap``, clip around the learner's policy at the update's start and weight each sample
            by its ratio to the older policy that acted (decoupled PPO, :mod:`lit_ppo.learning.decoupled`); ``false``: around
            the acting policy, as Cleanba does. No effect on synchronous rollouts (the acting policy is the learner's).
        decoupled_max_weight: truncate those importance weights at this value in the surrogate, as V-trace truncates
            its ratios (``null``: unbounded); ``stats/truncated_weights`` logs the share of samples truncated.
        target_kl: SB3's early stop: a minibatch whose approx KL (before its step) exceeds ``1.5 * target_kl`` ends
            the rollout's updates unapplied (``null``: off); ``stats/updates`` logs how many were applied. 0.02 by
            default: it holds the step that observation and return normalization free (``docs/zoo.md``, "Without a
            config"). Costs a host sync per minibatch (and a reduce across DDP ranks, so that every rank stops at
            the same update). With ``data.overlap`` the KL is measured from the learner's policy at the update's
            start, not from the older policy that acted (:mod:`lit_ppo.learning.decoupled`).
        adaptive_lr_kl: adapt the learning rate before every minibatch's step to hold its approx KL near this value
            (rsl_rl's adaptive schedule: divided by 1.5 when a minibatch's KL exceeds twice it, multiplied by 1.5 when
            below half of it, within [1e-5, 1e-2]; :mod:`lit_ppo.learning.learning_rate`), starting from ``lr``
            and carried from rollout to rollout (and in checkpoints, with the optimizer's state); ``stats/lr`` logs it
            at each rollout's end. ``null`` (default): off. Not with ``anneal_lr``. Costs a host sync per minibatch
            (a reduce across DDP ranks, so that every rank steps at the same rate). With ``target_kl`` too, the stop is
            checked first. With many minibatches a rollout (the defaults' 320) the KL, measured from the rollout's
            policy, passes twice the target part-way and every later step divides the rate: it ends each rollout at
            1e-5 (Ant-v5, ``docs/notebook/results.md``); ``adaptive_lr_every: rollout`` adapts it once per rollout
            instead.
        adaptive_lr_every: when ``adaptive_lr_kl`` moves the rate: ``minibatch`` (rsl_rl's, before each step) or
            ``rollout`` (after the rollout's updates, from the KL of its last minibatch scored: the rate of the next
            rollout's updates; one host sync a rollout).
        actor_device: where the rollout's policy acts (environments always step on the CPU): ``cpu`` (a CPU copy
            of the learner's weights, refreshed once per rollout), ``learner`` (the learner's network on its
            accelerator: an upload and a download every step), ``auto`` (measured at the first rollout; the
            decision and both timings are logged). ``cuda`` means ``learner`` and needs a CUDA learner.
        on_nonfinite: what a NaN/inf loss does: ``stop`` with an error naming the iteration, the term and the cause
            where the rollout shows one (checked once per rollout, before its checkpoint), or ``skip`` that minibatch's
            update (a host-device sync per step; ``stats/skipped_updates``) (:mod:`lit_ppo.learning.nonfinite`).
        max_skipped_rollouts: with ``on_nonfinite: skip``, stop with the same error after this many rollouts in a
            row whose every update was skipped.
        compile: ``torch.compile`` the minibatch objective and its backward (:class:`lit_ppo.learning.objective.PPOObjective`):
            ``true`` or a mode, not with ``recurrent``; off by default: it costs seconds at start-up.
    """

    def __init__(
        self,
        env_spec: Optional[dict[str, Any]] = None,
        hidden_sizes: Sequence[int] = (64, 64),
        encoder: str = "auto",
        activation: str = "tanh",
        network: Optional[ClassPathConfig] = None,
        recurrent: Union[bool, dict[str, Any], None] = None,
        log_std_init: float = LOG_STD_INIT,
        ortho_init: bool = True,
        lr: float = 3e-4,
        anneal_lr: bool = False,
        clip_coef: float = 0.2,
        anneal_clip: bool = False,
        clip_vloss: Union[bool, float] = False,
        vf_coef: float = 0.5,
        ent_coef: Optional[float] = None,
        max_grad_norm: Optional[float] = 0.5,
        norm_adv: bool = True,
        target_kl: Optional[float] = 0.02,
        adaptive_lr_kl: Optional[float] = None,
        adaptive_lr_every: str = "minibatch",
        decoupled: bool = False,
        decoupled_max_weight: Optional[float] = 2.0,
        actor_device: str = "cpu",
        on_nonfinite: str = "stop",
        max_skipped_rollouts: int = 3,
        compile: Union[bool, str] = False,
    ) -> None:
        super().__init__()
        if env_spec is None:
            raise ConfigError("model.env_spec: missing; pass PPODataModule(...).env_spec (the CLI links it for you).")
        self.save_hyperparameters()
        # Each concern's settings checked once, where they are read: the update's, the network's, the acting's.
        self.ppo = PPOSettings.from_hparams(self.hparams)
        self.learning_rate = self.ppo.learning_rate()
        check_actor_device(actor_device)
        self.automatic_optimization = False  # several optimizer steps per Lightning step: see the module docstring
        self.policy = ActorCritic.from_settings(self.hparams)
        ent_coef = default_ent_coef(env_spec["action"]) if self.ppo.ent_coef is None else self.ppo.ent_coef
        self.objective = PPOObjective(self.policy, self.ppo.vf_coef, ent_coef, self.ppo.value_clip, self.ppo.compile,
                                      self.ppo.decoupled_max_weight)
        self.recent_episodes = RecentEpisodes(RECENT_EPISODES)
        self.nonfinite = NonFiniteGuard(self.ppo.on_nonfinite, self.ppo.max_skipped_rollouts)
        self.rollout_metrics: dict[str, float] = {}  # the latest rollout's metrics, as the loggers got them
        self.rollout_logging = RolloutLogging()
        self.env_steps = 0  # environment steps of all processes so far: the step every metric is logged at
        self._epoch_start = self._fit_start = self._transfer_ms = 0.0
        self._fit_start_steps = 0  # env steps when this fit started (a resumed fit continues the count)
        self._summary: Optional[UpdateSummary] = None  # training_step's, for on_train_epoch_end

    # -- wiring ---------------------------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        # The data module acts with this policy: handed over once, its weights read at each rollout.
        datamodule = self.trainer.datamodule
        if callable(getattr(datamodule, "set_policy", None)):
            datamodule.set_policy(self.policy, self.hparams.actor_device)

    def configure_callbacks(self):
        if self.trainer.gradient_clip_val:
            raise ConfigError(f"trainer.gradient_clip_val: PPOModule clips every minibatch update itself; set "
                              f"model.max_grad_norm: {self.trainer.gradient_clip_val} instead (default 0.5) and "
                              "remove the Trainer's gradient_clip_val.")
        return [SaveLastOnStop(), CloseEnvironmentsOnError()]

    def configure_optimizers(self) -> torch.optim.Optimizer:
        # Fused Adam is ~4x faster than the CPU default for a small MLP, but Lightning refuses gradient clipping
        # with it under mixed precision (it unscales internally): there the multi-tensor one is used.
        kind = {"foreach": True} if "mixed" in str(self.trainer.precision) else {"fused": True}
        return torch.optim.Adam(self.parameters(), lr=self.ppo.lr, eps=1e-5, **kind)

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        # A rollout crosses once; on a CPU learner there is nothing to move.
        if device.type == "cpu":
            return batch
        start = time.perf_counter()
        moved = super().transfer_batch_to_device(batch, device, dataloader_idx)
        self._transfer_ms = (time.perf_counter() - start) * 1e3  # host-side time: the copies themselves overlap
        return moved

    # -- learning ---------------------------------------------------------------------------------------------------
    def on_train_start(self) -> None:
        self._fit_start, self._fit_start_steps = time.perf_counter(), self.env_steps
        self.rollout_logging.attach(self.trainer)

    def on_train_epoch_start(self) -> None:
        self._epoch_start, self._transfer_ms = time.perf_counter(), 0.0

    def training_step(self, rollout: Rollout, batch_idx: int) -> None:
        """One rollout's updates, then the checks and statistics that belong to the rollout."""
        start = time.perf_counter()
        self.env_steps = rollout.env_steps  # before validation runs at this epoch's end: it logs at these steps
        clip_coef = self.ppo.annealed_clip(rollout.budget_fraction)  # annealing follows the budget
        self.learning_rate.start_rollout(self.optimizers(), rollout.budget_fraction)
        if rollout.policy_lag:  # acted by an older policy (data.overlap): lit_ppo.learning.decoupled
            rollout = in_learner_units(self.policy, rollout)
            if rollout.has_trace and self.policy.return_scaling:  # GAE from the learner's critic, as synchronously
                rollout = self._recompute_advantages(rollout, merged_returns=True)
            if self.ppo.decoupled:
                rollout = decouple(self.policy, rollout)
            elif self.ppo.target_kl is not None:  # Cleanba's clip: the stop still measures the update's own KL
                rollout = measure_kl_from_learner(self.policy, rollout)
        sums, updates, skipped, last_kl = self._update(rollout, clip_coef)
        lr = current_lr(self.optimizers())  # what the last update used (model.adaptive_lr_kl moves it)
        if self.learning_rate.adapts_each_rollout and last_kl is not None:  # the next rollout's rate, on every rank
            self.learning_rate.end_rollout(self.optimizers(),
                                           float(self.trainer.strategy.reduce(last_kl, reduce_op="mean")))
        self.nonfinite.check_rollout(sums, list(self.policy.parameters()), updates, skipped, rollout.nonfinite,
                                     self.trainer.strategy, self.current_epoch + 1, self.global_step)
        self._update_normalization(rollout)
        self._summary = UpdateSummary(rollout, sums, updates, skipped, lr, clip_coef,
                                      learn_ms=(time.perf_counter() - start) * 1e3,
                                      max_weight=self.ppo.decoupled_max_weight,
                                      agents=self.hparams.env_spec.get("agents"))

    def _update(self, rollout: Rollout, clip_coef: float) -> tuple[Tensor, int, int, Optional[Tensor]]:
        """``update_epochs`` passes of minibatch steps; the terms summed over the applied updates, their number, skips,
        and the approx KL of the last minibatch scored (this rank's)."""
        ppo = self.ppo
        optimizer = self.optimizers()
        sums = torch.zeros(len(LOSS_NAMES), device=self.device)
        updates = skipped = 0
        last_kl = None
        for epoch in range(rollout.update_epochs):
            if epoch and rollout.recompute_advantages:
                rollout = self._recompute_advantages(rollout)
            for minibatch in rollout.minibatches(epoch):
                loss, terms = self.objective(self.objective.prepare(minibatch, ppo.norm_adv), clip_coef)
                last_kl = terms[KL_INDEX]
                kl = self._kl(terms) if ppo.target_kl is not None or self.learning_rate.needs_each_kl else None
                if ppo.target_kl is not None and bool(kl > 1.5 * ppo.target_kl):
                    return sums, updates, skipped, last_kl  # as SB3: the update that would exceed it is not applied
                if self.nonfinite.skip(terms, self.trainer.strategy):
                    skipped += 1
                    continue
                self.learning_rate.before_step(optimizer, kl)  # adaptive_lr_every: minibatch, as rsl_rl
                sums += terms  # no sync here: a non-finite term carries into the sums, checked once per rollout
                updates += 1
                optimizer.zero_grad()
                self.manual_backward(loss)
                optimizer.step()  # clipping happens in on_before_optimizer_step
        return sums, updates, skipped, last_kl

    @torch.no_grad()
    def _recompute_advantages(self, rollout: Rollout, merged_returns: bool = False) -> Rollout:
        """``data.recompute_advantages``: the rollout with GAE recomputed from the current critic's values;
        ``merged_returns``: its raw returns also become what the returns' std merges after the updates."""
        scale = self.policy.value_scale().to(self.device)  # data.return_scaling: values in units of the returns' std
        values = [self.policy.value(obs).float() * scale for obs in (rollout.obs, rollout.next_obs, rollout.final_obs)]
        advantages, returns = recompute_gae(rollout, *values)
        changed = {"advantages": advantages, "returns": returns / scale}
        if merged_returns:
            changed["reward_returns"] = returns[rollout.weights > 0] if rollout.weights.numel() else returns
        return dataclasses.replace(rollout, **changed)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        # Lightning calls this after the mixed-precision unscale (and after DDP's gradient averaging).
        if self.ppo.max_grad_norm:
            self.clip_gradients(optimizer, gradient_clip_val=self.ppo.max_grad_norm, gradient_clip_algorithm="norm")

    def _kl(self, terms: Tensor) -> Tensor:
        # This minibatch's KL before its step, averaged so every rank stops (or adapts) together; a sync per step.
        return self.trainer.strategy.reduce(terms[KL_INDEX], reduce_op="mean")

    def _update_normalization(self, rollout: Rollout) -> None:
        # After the updates, so that acting on a rollout and learning from it use the same statistics; over the real
        # transitions only (a next-step reset step's input is the finished episode's final observation, which
        # SB3's VecNormalize never sees). Pooled over ranks: every rank merges the same numbers.
        obs = rollout.obs[rollout.weights > 0] if rollout.weights.numel() else rollout.obs
        returns = rollout.reward_returns if rollout.reward_returns.numel() else None
        self.policy.update_normalization(obs, returns, partial(self.trainer.strategy.reduce, reduce_op="sum"))

    # -- logging ------------------------------------------------------------------------------------------------------
    def on_train_epoch_end(self) -> None:
        """Log this rollout once: one reduction across ranks, then one write per logger; stop at the budget."""
        s, self._summary = self._summary, None
        if s is None:  # resumed from a checkpoint saved after this iteration's updates: nothing new to log
            return
        rollout = s.rollout
        self.recent_episodes.add(rollout.episode_returns, rollout.episode_lengths)
        episode_return, episode_length = self.recent_episodes.means(self.device)
        losses = self.trainer.strategy.reduce(s.mean_terms(), reduce_op="mean")
        iteration_ms = (time.perf_counter() - self._epoch_start) * 1e3  # after the reduction: the work is done
        elapsed = time.perf_counter() - self._fit_start
        metrics = s.metrics(losses, updates=self.ppo.target_kl is not None, skipped=self.ppo.on_nonfinite == "skip")
        metrics.update({
            "rollout/return_mean": episode_return,
            "rollout/length_mean": episode_length,
            "time/env_steps": float(rollout.env_steps),
            "time/sps": (rollout.env_steps - self._fit_start_steps) / max(elapsed, 1e-9),
            "time/elapsed_s": elapsed,
            "time/transfer_ms": self._transfer_ms,
            "time/iteration_ms": iteration_ms,
        })
        self.rollout_metrics = metrics
        self.rollout_logging.write(self, metrics)
        if rollout.final:
            self.trainer.should_stop = True

    # -- checkpoints ------------------------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["lit_ppo_recent_episodes"] = self.recent_episodes.state(self.trainer.world_size)
        checkpoint["lit_ppo_env_steps"] = self.env_steps
        checkpoint["lit_ppo_nonfinite"] = self.nonfinite.state_dict()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Runs before the weights are loaded: a mismatch is named here instead of as a state_dict size error.
        try:
            path = self.trainer.ckpt_path
        except RuntimeError:  # load_from_checkpoint: no Trainer
            path = None
        check_compatible(checkpoint.get("hyper_parameters", {}), dict(self.hparams), str(path or "the checkpoint"))
        self.recent_episodes.load(checkpoint.get("lit_ppo_recent_episodes") or [], self.global_rank)
        self.env_steps = int(checkpoint.get("lit_ppo_env_steps", 0))
        self.nonfinite.load_state_dict(checkpoint.get("lit_ppo_nonfinite", {}))

    # -- evaluation (validate / test / predict) ---------------------------------------------------------------------
    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        returns = self.all_gather(batch["returns"].to(self.device)).flatten().float()
        lengths = self.all_gather(batch["lengths"].to(self.device)).flatten().float()
        self.log_dict({"eval/return_mean": returns.mean(), "eval/return_std": returns.std(unbiased=False),
                       "eval/length_mean": lengths.mean()}, prog_bar=True, batch_size=returns.numel())
        if self.hparams.env_spec.get("outcomes"):  # a game (envs/turn_based.py): each return is +1, 0 or -1
            self.log_dict({"eval/win_rate": (returns > 0).float().mean(), "eval/draw_rate": (returns == 0).float().mean(),
                           "eval/loss_rate": (returns < 0).float().mean()}, batch_size=returns.numel())
        # Lightning logs at a logged "step" value when there is one: the evaluation lands on the env-step axis of
        # the rollout metrics (during fit, the rollout it followed; afterwards, the checkpoint's).
        self.log("step", float(self.env_steps), batch_size=returns.numel())

    test_step = validation_step

    def predict_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        """The episodes' returns and lengths (played by the predict loader), for a prediction writer."""
        return batch
