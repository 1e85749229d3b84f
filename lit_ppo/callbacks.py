"""The callbacks a config names by ``lit_ppo.callbacks.<Name>``, and the CLI's default callbacks.

Defined here: the CSV writer of ``predict`` and :func:`default_callbacks`. Named here, defined where their data is:
the progress bar in environment steps (:mod:`lit_ppo.learning.progress_bar`), evaluation videos
(:mod:`lit_ppo.inference.video`) and closing the environments after an error (:mod:`lit_ppo.collection.teardown`).
"""

import csv
import os
import warnings
from pathlib import Path
from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter, Callback, Checkpoint, ProgressBar
from tqdm import tqdm  # tqdm.write: a line printed above any open progress bar

from lit_ppo.checkpointing.callbacks import PeriodicCheckpoint
from lit_ppo.collection.teardown import CloseEnvironmentsOnError
from lit_ppo.inference.video import EvaluationVideo
from lit_ppo.learning.progress_bar import EnvStepProgressBar

__all__ = ["CloseEnvironmentsOnError", "EnvStepProgressBar", "EpisodeCSVWriter", "EvaluationVideo", "default_callbacks"]

DEFAULT_LAST_EVERY = 10  # iterations between the default last.ckpt saves of a fit without a checkpoint callback


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
