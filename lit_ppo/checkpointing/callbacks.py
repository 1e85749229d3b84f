"""The checkpoint callbacks: ``last.ckpt`` every few iterations beside the monitored one, and a checkpoint at the next
rollout boundary on SIGTERM/SIGINT (compatibility checks: :mod:`lit_ppo.checkpointing.settings`; random states:
:mod:`lit_ppo.checkpointing.rng`).

Saving itself is Lightning's: ``ModelCheckpoint`` writes through ``_atomic_save`` (serialized in memory,
then written inside an fsspec transaction: a temporary file renamed over the old one on success), so an
interrupted save never replaces a good ``last.ckpt`` with a truncated one. ``tests/test_checkpoints.py``
checks that behaviour rather than trusting it.
"""

import os
import signal
from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import Checkpoint, ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_info


class PeriodicCheckpoint(ModelCheckpoint):
    """Lightning's ``ModelCheckpoint`` with one change: ``save_last`` writes ``last.ckpt`` every ``every_n_epochs``
    iterations whether or not the monitored checkpoint was saved that iteration.

    Lightning 2.6's ``save_last`` writes ``last.ckpt`` only when a monitored (top-k) checkpoint is saved, so a run
    whose return stopped improving would resume from long before it was stopped. ``last.ckpt`` is also written at
    the end of training and on SIGTERM/SIGINT (:class:`SaveLastOnStop`). Everything else (``monitor``,
    ``save_top_k``, ``filename`` of the monitored checkpoint, ``every_n_epochs``) is ``ModelCheckpoint``'s.

    With ``monitor: eval/return_mean`` and ``save_on_train_epoch_end: false`` (the shipped configs), ``best.ckpt``
    is the policy of the best deterministic evaluation so far: the monitored checkpoint is then considered at the
    end of every evaluation, whatever ``trainer.check_val_every_n_epoch`` is, and ``every_n_epochs`` paces
    ``last.ckpt`` only (``ModelCheckpoint`` alone would skip evaluations at iterations that are not multiples of it).

    Args:
        dirpath: the checkpoint directory (the shipped configs: ``runs/<name>/checkpoints``).
        filename: the monitored checkpoint's file name (``best``).
        monitor: the metric it keeps the best of (``eval/return_mean``), or None for ``last.ckpt`` only.
        save_last: write ``last.ckpt`` every ``every_n_epochs`` iterations (and at the end and on a signal).
        every_n_epochs: the iterations between two ``last.ckpt`` saves.
        **kwargs: ``ModelCheckpoint``'s other arguments (``mode``, ``save_top_k``, ``save_on_train_epoch_end``, ...).
    """

    def __init__(self, dirpath: Optional[str] = None, filename: Optional[str] = None, monitor: Optional[str] = None,
                 save_last: bool = True, every_n_epochs: Optional[int] = None, **kwargs: Any) -> None:
        at_evaluation = monitor is not None and kwargs.get("save_on_train_epoch_end") is False
        super().__init__(dirpath=dirpath, filename=filename, monitor=monitor, save_last=False,
                         every_n_epochs=1 if at_evaluation else every_n_epochs, **kwargs)
        self.periodic_last = save_last
        self.last_every_n_epochs = every_n_epochs or 1

    def on_train_epoch_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if self.periodic_last and self.dirpath and (trainer.current_epoch + 1) % self.last_every_n_epochs == 0:
            path = os.path.join(self.dirpath, self.CHECKPOINT_NAME_LAST + self.FILE_EXTENSION)
            trainer.save_checkpoint(path, weights_only=False)


class SaveLastOnStop(Checkpoint):
    """``last.ckpt`` always holds the state training stopped in: at the end of training (ModelCheckpoint saves
    only every ``every_n_epochs``), and on SIGTERM or SIGINT, where it finishes the current rollout's updates,
    saves and stops.

    Saving at the rollout boundary keeps resuming exact (a mid-rollout checkpoint could not restore the
    half-used rollout). A second SIGINT interrupts at once, as Ctrl+C usually does. It is a ``Checkpoint``
    subclass so that Lightning runs its epoch-end hook after the LightningModule's, like ModelCheckpoint's.

    With several processes the decision is collective: a signal that reaches one rank only (as a scheduler may
    send it) stops every rank after the same rollout, each taking part in the one save.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: Optional[int] = None
        self.stopped_on_signal = False  # the same on every rank: the decision is reduced across them
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and self.received is not None:
            raise KeyboardInterrupt
        self.received = signum
        rank_zero_info(f"lit_ppo: received {signal.Signals(signum).name}; saving last.ckpt at the end of this "
                       "rollout's updates, then stopping (Ctrl+C again to stop at once).")

    def on_train_start(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if not _in_main_thread():
            return
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handler)

    def on_train_epoch_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if not trainer.strategy.reduce_boolean_decision(self.received is not None, all=False):
            return
        self.stopped_on_signal = True
        for path in self._save_last(trainer):
            rank_zero_info(f"lit_ppo: saved {path} after iteration {trainer.current_epoch + 1}; resume with "
                           "`--ckpt_path last`.")
        trainer.should_stop = True

    def on_train_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        self._restore_handlers()
        if not self.stopped_on_signal:  # saving is collective: every rank must agree on it
            self._save_last(trainer)

    @staticmethod
    def _save_last(trainer: "L.Trainer") -> list[str]:
        """``last.ckpt`` in the directory of every ModelCheckpoint that keeps one."""
        paths: list[str] = []
        for callback in trainer.checkpoint_callbacks:
            if not isinstance(callback, ModelCheckpoint) or not callback.dirpath:
                continue
            if callback.save_last or getattr(callback, "periodic_last", False):
                path = os.path.join(callback.dirpath, callback.CHECKPOINT_NAME_LAST + callback.FILE_EXTENSION)
                if path not in paths:
                    trainer.save_checkpoint(path, weights_only=False)
                    paths.append(path)
        return paths

    def on_exception(self, trainer: "L.Trainer", pl_module: "L.LightningModule", exception: BaseException) -> None:
        self._restore_handlers()

    def _restore_handlers(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
