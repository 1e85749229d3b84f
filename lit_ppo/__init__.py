"""PPO on any gymnasium environment, with acting on the CPU and learning wherever the Lightning Trainer says."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers, IDEs and the API docs (mkdocstrings reads the source) see
    from lit_ppo.collection.rollout import Rollout
    from lit_ppo.collection.datamodule import PPODataModule
    from lit_ppo.collection.datasets import RolloutDataset
    from lit_ppo.learning.module import PPOModule
    from lit_ppo.inference.load import load_policy
    from lit_ppo.inference.trained_policy import TrainedPolicy

# Public names, imported on first use (PEP 562): a process that imports one submodule (the data.overlap
# collector imports lit_ppo.collection.overlap.worker) then does not import Lightning, ~3 s of its start-up.
_EXPORTS = {
    "PPODataModule": "lit_ppo.collection.datamodule",
    "PPOModule": "lit_ppo.learning.module",
    "Rollout": "lit_ppo.collection.rollout",
    "RolloutDataset": "lit_ppo.collection.datasets",
    "TrainedPolicy": "lit_ppo.inference.trained_policy",
    "load_policy": "lit_ppo.inference.load",
}
__all__ = list(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lit_ppo' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
