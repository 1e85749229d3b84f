"""Checking a checkpoint file before anything uses it: missing, a directory, empty, corrupt or not Lightning's.

Apart from ``lit_ppo.checkpointing.callbacks`` because ``lit_ppo.load_policy`` needs these checks and nothing of Lightning: a
process that only acts with a trained policy then does not import Lightning (~3 s of its start-up).
"""

import os
import zipfile
from typing import Any, Optional

import torch

from lit_ppo.errors import ConfigError

SPECIAL_CKPT_PATHS = ("last", "best", "hpc", "registry")


class CheckpointError(ConfigError):
    """A checkpoint file cannot be used: missing, empty, corrupt, or from another environment or network."""


def check_checkpoint_file(path: Optional[str]) -> Optional[dict[str, Any]]:
    """Fail with the file's name before any training if ``path`` cannot be a loadable checkpoint; returns the
    checkpoint (None for Lightning's special paths such as ``last``)."""
    if path is None or str(path) in SPECIAL_CKPT_PATHS or str(path).startswith("registry:"):
        return None
    if not os.path.exists(path):
        raise CheckpointError(f"ckpt_path: checkpoint file {path} does not exist. Check the path, or use "
                              "`--ckpt_path last` to resume from the checkpoint directory of the config.")
    if os.path.isdir(path):
        raise CheckpointError(f"ckpt_path: {path} is a directory; give the checkpoint file (e.g. {path}/last.ckpt).")
    if os.path.getsize(path) == 0:
        raise CheckpointError(f"ckpt_path: checkpoint file {path} is empty (0 bytes): the save that wrote it did "
                              "not finish. Use an earlier checkpoint.")
    try:
        if not zipfile.is_zipfile(path):
            raise ValueError("not a torch checkpoint archive")
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise corrupt(path, err) from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(f"ckpt_path: {path} holds no Lightning checkpoint (no 'state_dict').")
    return checkpoint


def corrupt(path: Any, err: BaseException) -> CheckpointError:
    return CheckpointError(f"ckpt_path: checkpoint file {path} is corrupt or not a Lightning checkpoint "
                           f"({type(err).__name__}: {str(err).splitlines()[0][:200]}). Use an earlier checkpoint.")
