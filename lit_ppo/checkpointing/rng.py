"""Process-wide random states (torch, numpy, python) as plain data: checkpoints load with ``weights_only=True``, which
refuses numpy's legacy state tuple."""

import random
from typing import Any

import numpy as np
import torch


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
