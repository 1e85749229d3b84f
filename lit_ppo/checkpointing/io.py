"""Checkpoint files as Lightning reads and writes them in a run: a file that cannot be read is named, and a new run
never writes into a directory that holds an earlier run's checkpoints."""

import os
from typing import Any

import lightning as L
from lightning.pytorch.plugins.io import TorchCheckpointIO

from lit_ppo.checkpointing.files import CheckpointError, corrupt
from lit_ppo.errors import ConfigError


class CheckedCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint reading, with a file that cannot be read named as
    :func:`lit_ppo.checkpointing.files.check_checkpoint_file` names it: the CLI checks a checkpoint when it parses the
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
