"""Writing a rollout's metrics: to every logger in one call, and through ``self.log`` only what a callback reads."""

from typing import Any

import lightning as L

from lit_ppo.callbacks import EnvStepProgressBar

PROGRESS_METRICS = ("rollout/return_mean", "time/env_steps", "time/sps")  # what a progress bar shows


class RolloutLogging:
    """Per-rollout logging in two parts, both Lightning's public API:

    - every metric goes to every logger (``trainer.loggers``) in one ``Logger.log_metrics`` call, at
      ``trainer.global_step``;
    - the metrics a callback reads from ``trainer.callback_metrics`` (any callback's ``monitor``, e.g.
      ``ModelCheckpoint`` or ``EarlyStopping``; the progress metrics when a progress bar other than lit_ppo's
      shows them) also go through ``LightningModule.log_dict``, without reaching the loggers a second time.

    Why not ``self.log`` for all of them: in Lightning 2.6.6 each ``self.log`` call moves its stored result to the
    value's device through ``apply_to_collection``, ~0.4-0.6 ms per key. Measured on this project's 2-core Xeon
    (``python benchmarks/logging_cost.py``): 25 keys per rollout through ``self.log_dict`` 9.6 ms, through one
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
        for logger in module.loggers:
            logger.log_metrics(metrics, step=module.global_step)
        read = {key: metrics[key] for key in self.callback_keys if key in metrics}
        if read:
            module.log_dict(read, logger=False, prog_bar=True)
