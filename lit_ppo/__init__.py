"""PPO on any gymnasium environment, with acting on the CPU and learning wherever the Lightning Trainer says."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers, IDEs and the API docs (mkdocstrings reads the source) see
    from lit_ppo.batch import Rollout
    from lit_ppo.data import PPODataModule
    from lit_ppo.datasets import RolloutDataset
    from lit_ppo.module import PPOModule
    from lit_ppo.policy import TrainedPolicy, load_policy

# Public names, imported on first use (PEP 562): a process that imports one submodule (the data.overlap
# collector imports lit_ppo.collector_worker) then does not import Lightning, ~3 s of its start-up.
_EXPORTS = {
    "PPODataModule": "lit_ppo.data",
    "PPOModule": "lit_ppo.module",
    "Rollout": "lit_ppo.batch",
    "RolloutDataset": "lit_ppo.datasets",
    "TrainedPolicy": "lit_ppo.policy",
    "load_policy": "lit_ppo.policy",
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
