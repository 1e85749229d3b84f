"""Callbacks: a progress bar in environment steps, the CLI's default callbacks, closing environments after an error,
and the CSV writer of ``predict``.
(Evaluation videos are in :mod:`lit_ppo.video`.)
"""

import csv
import os
import warnings
from pathlib import Path
from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter, Callback, Checkpoint, ProgressBar, TQDMProgressBar
from tqdm import tqdm  # tqdm.write: a line printed above any open progress bar

from lit_ppo.checkpointing import PeriodicCheckpoint

# Read from the module's latest rollout (it does not self.log them): the numbers PPO users watch.
BAR_METRICS = ("rollout/return_mean", "time/sps")
HIDDEN_BAR_METRICS = ("time/env_steps", "v_num")  # the bar's own count; the logger's version
DEFAULT_LAST_EVERY = 10  # iterations between the default last.ckpt saves of a fit without a checkpoint callback
TB_PREVIEW_WIDTH = 320


def _short(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


class EnvStepProgressBar(TQDMProgressBar):
    """Lightning's TQDM bar, counting environment steps against the budget instead of one rollout's batches.

    The training bar advances once per rollout and shows the latest logged ``time/sps`` and
    ``rollout/return_mean``::

        env steps:  41%|████      | 41k/100k [00:09<00:13, 4.5kstep/s, rollout/return_mean=187.3, time/sps=4512]

    The total is the budget (``PPODataModule.num_iterations`` rollouts), or a smaller ``trainer.max_epochs``. With a
    data module that has no ``steps_per_iteration`` it is Lightning's bar unchanged.
    """

    def _steps_per_iteration(self, trainer: "L.Trainer") -> Optional[int]:
        return getattr(trainer.datamodule, "steps_per_iteration", None)

    def on_train_start(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        super().on_train_start(trainer, pl_module)
        per_iteration = self._steps_per_iteration(trainer)
        if per_iteration is None:
            return
        bar = self.train_progress_bar
        iterations = trainer.datamodule.num_iterations
        if trainer.max_epochs is not None and trainer.max_epochs >= 0:
            iterations = min(iterations, trainer.max_epochs)
        bar.reset(total=iterations * per_iteration)
        bar.initial = bar.n = trainer.current_epoch * per_iteration  # a resumed run starts part-way
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
        bar.n = trainer.current_epoch * self._steps_per_iteration(trainer)
        bar.set_postfix(self.get_metrics(trainer, pl_module), refresh=False)
        bar.refresh()

    def get_metrics(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        rollout_metrics = getattr(pl_module, "rollout_metrics", {})  # PPOModule's latest rollout
        for name in BAR_METRICS:
            if name in rollout_metrics:
                items[name] = float(rollout_metrics[name])
        return {k: _short(v) if isinstance(v, float) else v for k, v in items.items() if k not in HIDDEN_BAR_METRICS}


def default_callbacks(subcommand: Optional[str], trainer_config: Any, callbacks: list) -> list[Callback]:
    """lit_ppo's default callbacks for the CLI, each added only where the config does not bring its own.

    - :class:`EnvStepProgressBar` in place of Lightning's batch counter, unless the bar is off
      (``trainer.enable_progress_bar: false``) or the config names a progress bar.
    - :class:`EpisodeCSVWriter` for ``predict``, unless the config names a prediction writer.
    - for ``fit`` without any checkpoint callback (no config, say): a
      :class:`lit_ppo.checkpointing.PeriodicCheckpoint` keeping ``last.ckpt`` in ``<default_root_dir>/checkpoints``
      every 10 iterations (and at the end, and on SIGTERM), where ``--ckpt_path last`` finds it again; Lightning's
      own default would put it in a new ``lightning_logs/version_N`` per run.
    """
    added: list[Callback] = []
    bar_on = trainer_config.get("enable_progress_bar") is not False
    if bar_on and not any(isinstance(c, ProgressBar) for c in callbacks):
        added.append(EnvStepProgressBar())
    if subcommand == "predict" and not any(isinstance(c, BasePredictionWriter) for c in callbacks):
        added.append(EpisodeCSVWriter())
    checkpointing = trainer_config.get("enable_checkpointing") is not False
    if subcommand == "fit" and checkpointing and not any(isinstance(c, Checkpoint) for c in callbacks):
        root = trainer_config.get("default_root_dir") or "."
        added.append(PeriodicCheckpoint(dirpath=os.path.join(str(root), "checkpoints"), save_top_k=0,
                                        save_last=True, every_n_epochs=DEFAULT_LAST_EVERY))
    return added


class EpisodeCSVWriter(BasePredictionWriter):
    """Writes the episodes of ``predict`` as CSV rows ``episode,return,length``.

    Each predict batch holds the deterministic episodes of one evaluation (``data.eval_episodes`` of them).

    Args:
        path: the CSV file; ``None``: ``episodes.csv`` in the run's log directory (``trainer.log_dir``). With
            several processes each rank writes its own episodes, to ``<stem>.rank<r>.csv``.
    """

    def __init__(self, path: Optional[str] = None) -> None:
        super().__init__(write_interval="epoch")
        self.path = path

    def setup(self, trainer: "L.Trainer", pl_module: "L.LightningModule", stage: str) -> None:
        # Lightning cannot track batch indices of an IterableDataset; rows are numbered here instead.
        warnings.filterwarnings("ignore", message=".*infer the batch indices.*")

    def write_on_epoch_end(self, trainer: "L.Trainer", pl_module: Any, predictions: Any, batch_indices: Any) -> None:
        path = Path(self.path) if self.path else Path(trainer.log_dir or ".") / "episodes.csv"
        if trainer.world_size > 1:
            path = path.with_name(f"{path.stem}.rank{trainer.global_rank}{path.suffix}")
        rows = []
        for batch in predictions:
            rows += zip(batch["returns"].tolist(), batch["lengths"].tolist())
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["episode", "return", "length"])
            writer.writerows((i, ret, int(length)) for i, (ret, length) in enumerate(rows))
        mean = sum(r for r, _ in rows) / max(len(rows), 1)
        tqdm.write(f"predict: {len(rows)} episodes, return_mean {mean:.2f}, written to {path}")


class CloseEnvironmentsOnError(L.Callback):
    """Closes the data module's training environments (and so joins an ``AsyncVectorEnv``'s workers) when fit ends
    with an exception: Lightning calls ``LightningDataModule.teardown`` only when a stage ends normally."""

    def on_exception(self, trainer: "L.Trainer", pl_module: "L.LightningModule", exception: BaseException) -> None:
        datamodule = trainer.datamodule
        if datamodule is not None and callable(getattr(datamodule, "teardown", None)):
            datamodule.teardown("fit")


from lit_ppo.video import EvaluationVideo  # noqa: E402,F401  (the class path `lit_ppo.callbacks.EvaluationVideo` stays)
