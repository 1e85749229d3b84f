"""What makes stopping and resuming a non-event: checking a checkpoint's fit with the run (the file itself:
:mod:`lit_ppo.checkpoint_files`), process-wide random states, and a checkpoint at the next rollout boundary on
SIGTERM/SIGINT.

Saving itself is Lightning's: ``ModelCheckpoint`` writes through ``_atomic_save`` (serialized in memory,
then written inside an fsspec transaction: a temporary file renamed over the old one on success), so an
interrupted save never replaces a good ``last.ckpt`` with a truncated one. ``tests/test_checkpoints.py``
checks that behaviour rather than trusting it.
"""

import os
import random
import signal
from typing import Any, Optional

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Checkpoint, ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities import rank_zero_info

from lit_ppo.checkpoint_files import CheckpointError, corrupt
from lit_ppo.errors import ConfigError
from lit_ppo.recurrent import RecurrentConfig

# Model settings that decide the network's shape: a checkpoint loads only into the same ones.
ARCHITECTURE_KEYS = {"hidden_sizes": "hidden sizes", "encoder": "encoder", "activation": "activation",
                     "network": "network", "recurrent": "recurrent core"}


class CheckedCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint reading, with a file that cannot be read named as
    :func:`lit_ppo.checkpoint_files.check_checkpoint_file` names it: the CLI checks a checkpoint when it parses the
    command line, and the Trainer reads it again later (a file that changed in between gave torch's
    ``PytorchStreamReader`` traceback)."""

    def load_checkpoint(self, path, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return super().load_checkpoint(path, *args, **kwargs)
        except FileNotFoundError:
            raise CheckpointError(f"ckpt_path: checkpoint file {path} does not exist (any more). Check the path.") \
                from None
        except Exception as err:
            raise corrupt(path, err) from None


def check_fresh_checkpoint_dirs(trainer: "L.Trainer", resuming: bool) -> None:
    """A new run (not resuming) must not share a checkpoint directory with an earlier run's checkpoints.

    Lightning would keep the old ``best.ckpt`` and write this run's as ``best-v1.ckpt`` while overwriting
    ``last.ckpt``: ``--ckpt_path .../best.ckpt`` would then silently load the old run's policy.
    """
    if resuming:
        return
    for callback in trainer.checkpoint_callbacks:
        dirpath = getattr(callback, "dirpath", None)
        if not dirpath or not os.path.isdir(dirpath):
            continue  # None: Lightning puts checkpoints in the logger's new version directory
        earlier = sorted(name for name in os.listdir(dirpath) if name.endswith(".ckpt"))
        if earlier:
            raise ConfigError(
                f"trainer.callbacks: ModelCheckpoint dirpath {dirpath} already holds an earlier run's checkpoints ({', '.join(earlier)}). "
                "A new run there would leave the old best.ckpt beside its own best-v1.ckpt. Continue that run with "
                "`--ckpt_path last`, move or delete those files, or give this run another dirpath "
                "(--trainer.default_root_dir does not move a configured dirpath)."
            )


def plain(value: Any, key: str = "") -> Any:
    """A setting as compared: sequences as lists, and ``model.recurrent`` parsed (``true`` is its defaults)."""
    if key == "recurrent":
        return RecurrentConfig.parse(value)
    return list(value) if isinstance(value, (list, tuple)) else value


def check_compatible(saved: dict[str, Any], current: dict[str, Any], path: str = "the checkpoint") -> None:
    """Compare a checkpoint's model hyperparameters with this run's and name every mismatch of shape."""
    problems = []
    saved_spec, spec = saved.get("env_spec") or {}, current.get("env_spec") or {}
    for key, label in (("env_id", "environment"), ("observation", "observation space"), ("action", "action space"),
                       ("normalize_obs", "data.normalize_obs"), ("normalize_reward", "data.normalize_reward"),
                       ("action_masks", "data.action_masks")):
        was, now = saved_spec.get(key), spec.get(key)
        if key.startswith("normalize"):  # older checkpoints: absent means off
            was, now = bool(was), bool(now)
        if was != now:
            problems.append(f"{label}: checkpoint {was!r}, this run {now!r}")
    for key, label in ARCHITECTURE_KEYS.items():
        was, now = plain(saved.get(key), key), plain(current.get(key), key)
        if was != now:
            problems.append(f"{label} (model.{key}): checkpoint {was!r}, this run {now!r}")
    if problems:
        raise CheckpointError(f"ckpt_path: {path} does not fit this run: " + "; ".join(problems)
                              + ". Use the config the checkpoint was trained with (its config.yaml is next to the "
                              "logs), or a checkpoint of this environment and network.")


def global_rng_states() -> dict[str, Any]:
    """torch, numpy and python random states as plain data (checkpoints load with ``weights_only=True``)."""
    np_state = np.random.get_state(legacy=False)
    return {
        "torch": torch.get_rng_state(),
        "numpy": {"key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)), "pos": int(np_state["state"]["pos"]),
                  "has_gauss": int(np_state["has_gauss"]), "gauss": float(np_state["gauss"])},
        "python": random.getstate(),
    }


def set_global_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    n = states["numpy"]
    np.random.set_state({"bit_generator": "MT19937",
                         "state": {"key": n["key"].numpy().astype(np.uint32), "pos": n["pos"]},
                         "has_gauss": n["has_gauss"], "gauss": n["gauss"]})
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))


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
