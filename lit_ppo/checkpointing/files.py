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


def file_kind(path: Any) -> Optional[str]:
    """What a file is by its content, whatever its name: ``"torchscript"`` (a TorchScript archive), ``"checkpoint"``
    (another torch archive holding Lightning's ``pytorch-lightning_version`` key), ``"torch"`` (any other
    ``torch.save`` archive), ``"onnx"`` (a protobuf that begins as ONNX models do) or None. Nothing is unpickled."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
                if any(name.endswith("/constants.pkl") or "/code/" in name for name in names):
                    return "torchscript"
                pickles = [name for name in names if name.endswith("/data.pkl")]
                if pickles and b"pytorch-lightning_version" in archive.read(pickles[0]):
                    return "checkpoint"
                return "torch" if pickles else None
        with open(path, "rb") as f:
            head = f.read(2)
    except (OSError, zipfile.BadZipFile):
        return None
    # ModelProto's first field, ir_version (field 1, varint: tag 0x08), which every ONNX writer puts first
    return "onnx" if len(head) == 2 and head[0] == 0x08 and 0 < head[1] < 0x80 else None


def corrupt(path: Any, err: BaseException) -> CheckpointError:
    return CheckpointError(f"ckpt_path: checkpoint file {path} is corrupt or not a Lightning checkpoint "
                           f"({type(err).__name__}: {str(err).splitlines()[0][:200]}). Use an earlier checkpoint.")
