"""The progress bar in environment steps: Lightning's TQDM bar counting steps against the budget, with the numbers
PPO users watch (the return, steps per second) read from the module's latest rollout."""

from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar

# Read from the module's latest rollout (it does not self.log them): the numbers PPO users watch.
BAR_METRICS = ("rollout/return_mean", "time/sps")
HIDDEN_BAR_METRICS = ("time/env_steps", "v_num")  # the bar's own count; the logger's version

def _short(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


class EnvStepProgressBar(TQDMProgressBar):
    """Lightning's TQDM bar, counting environment steps against the budget instead of one rollout's batches.

    The training bar advances once per rollout and shows the latest logged ``time/sps`` and
    ``rollout/return_mean``::

        env steps:  41%|████      | 41k/100k [00:09<00:13, 4.5kstep/s, rollout/return_mean=187.3, time/sps=4512]

    The total is the budget (the rollouts that fit in it after the steps done, a checkpoint's on a resume), or a
    smaller ``trainer.max_epochs``. With a data module that has no ``steps_per_iteration`` it is Lightning's bar unchanged.
    """

    def _steps_per_iteration(self, trainer: "L.Trainer") -> Optional[int]:
        return getattr(trainer.datamodule, "steps_per_iteration", None)

    def _env_steps(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> int:
        # PPOModule's count (the checkpoint's after a resume, whatever the rollout size then); else by iterations
        default = trainer.current_epoch * self._steps_per_iteration(trainer)
        return int(getattr(pl_module, "env_steps", default))

    def on_train_start(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        super().on_train_start(trainer, pl_module)
        per_iteration = self._steps_per_iteration(trainer)
        if per_iteration is None:
            return
        bar = self.train_progress_bar
        start = self._env_steps(trainer, pl_module)  # a resumed run starts part-way, at its checkpoint's count
        iterations = trainer.datamodule.iterations_left(start)
        if trainer.max_epochs is not None and trainer.max_epochs >= 0:
            iterations = min(iterations, max(trainer.max_epochs - trainer.current_epoch, 0))
        bar.reset(total=start + iterations * per_iteration)
        bar.initial = bar.n = start
        bar.unit, bar.unit_scale = "step", True
        bar.set_description("env steps")

    def on_train_epoch_start(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if self._steps_per_iteration(trainer) is None:
            return super().on_train_epoch_start(trainer, pl_module)
        # The previous rollout's metrics are logged by now (at on_train_epoch_end, callbacks run before the
        # module logs), so this is where the bar catches up.
        self._show_progress(trainer, pl_module)

    def on_train_batch_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule", *args: Any) -> None:
        if self._steps_per_iteration(trainer) is None:
            super().on_train_batch_end(trainer, pl_module, *args)

    def on_train_epoch_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if self._steps_per_iteration(trainer) is None:
            super().on_train_epoch_end(trainer, pl_module)

    def on_train_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if self._steps_per_iteration(trainer) is not None:
            self._show_progress(trainer, pl_module)
        super().on_train_end(trainer, pl_module)

    def _show_progress(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        bar = self.train_progress_bar
        bar.n = self._env_steps(trainer, pl_module)
        bar.set_postfix(self.get_metrics(trainer, pl_module), refresh=False)
        bar.refresh()

    def get_metrics(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        rollout_metrics = getattr(pl_module, "rollout_metrics", {})  # PPOModule's latest rollout
        for name in BAR_METRICS:
            if name in rollout_metrics:
                items[name] = float(rollout_metrics[name])
        return {k: _short(v) if isinstance(v, float) else v for k, v in items.items() if k not in HIDDEN_BAR_METRICS}
