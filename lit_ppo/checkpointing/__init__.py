"""Checkpoints: the callbacks that save them, the file checks, settings compatibility on resume.

``lit_ppo.checkpointing.PeriodicCheckpoint`` and ``SaveLastOnStop`` are the class paths configs name. They are
imported on first use (PEP 562), so that reading a checkpoint file (:mod:`lit_ppo.checkpointing.files`, which
``load_policy`` uses) does not import Lightning.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lit_ppo.checkpointing.callbacks import PeriodicCheckpoint, SaveLastOnStop

__all__ = ["PeriodicCheckpoint", "SaveLastOnStop"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'lit_ppo.checkpointing' has no attribute {name!r}")
    return getattr(importlib.import_module("lit_ppo.checkpointing.callbacks"), name)
