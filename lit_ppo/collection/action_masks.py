"""Invalid-action masks from the environment, and the checks they get before the policy acts on them.

``data.action_masks`` says where they come from, per sub-environment, True = valid (sb3-contrib's convention):

- ``method``: the environment's ``action_masks()`` method, found through its wrappers (the vector env's
  ``call("action_masks")``, which gymnasium resolves with ``get_wrapper_attr`` in every sub-environment; sync and
  async vector envs have it);
- ``info``: the ``"action_mask"`` entry of the info dict that ``reset`` and ``step`` return (a vector env stacks
  it per sub-environment).

A mask is flat: ``n`` booleans for ``Discrete(n)``; the components' masks concatenated for ``MultiDiscrete``
(``sum(nvec)``); a ``[0 valid, 1 valid]`` pair per element for ``MultiBinary`` (``2 * n``). Box actions have none.
"""

from typing import Any

import numpy as np
import torch
from torch import Tensor

from lit_ppo.networks.distributions import CategoricalHead, make_head
from lit_ppo.errors import ConfigError, EnvStepError
from lit_ppo.envs.spaces import ActionSpec

MASK_SOURCES = ("method", "info")
INFO_KEY = "action_mask"


def mask_size(spec: ActionSpec, source: str) -> int:
    """The booleans in one sub-environment's mask; a :class:`ConfigError` for a source or space that has none."""
    return _checked_head(spec, source).mask_size


def _checked_head(spec: ActionSpec, source: str):
    if source not in MASK_SOURCES:
        raise ConfigError(f"data.action_masks: must be null, 'method' (the env's action_masks()) or 'info' "
                          f"(info['{INFO_KEY}']), got {source!r}.")
    head = make_head(spec)
    if head.mask_size is None:
        raise ConfigError(f"data.action_masks: the action space {spec} has no action masks (Discrete, MultiDiscrete "
                          "and MultiBinary do); turn data.action_masks off.")
    return head


class ActionMaskReader:
    """Reads the current masks of a vector env's ``num_envs`` sub-environments as a ``[num_envs, size]`` bool
    tensor, refusing a mask of the wrong size and a sub-environment with no valid action."""

    def __init__(self, spec: ActionSpec, source: str, env_id: str = "?", rank: int = 0) -> None:
        self.head, self.source, self.env_id, self.rank = _checked_head(spec, source), source, env_id, rank
        self.size = self.head.mask_size

    def read(self, envs, info: dict[str, Any], own_step: int) -> Tensor:
        if self.source == "method":
            try:
                masks = envs.unwrapped.call("action_masks")  # vector wrappers do not forward call()
            except AttributeError as err:
                raise EnvStepError(f"data.action_masks: 'method': environment {self.env_id!r} has no action_masks() "
                                   f"method ({err}); add one, or give masks in info['{INFO_KEY}'] with 'info'.") from err
        elif INFO_KEY in info:
            masks = info[INFO_KEY]
        else:
            raise EnvStepError(f"data.action_masks: 'info': environment {self.env_id!r} returned no "
                               f"info['{INFO_KEY}'] at its step {own_step} (info keys: {sorted(info)}).")
        rows = [np.asarray(m, dtype=bool).reshape(-1) for m in masks]
        bad = next((i for i, row in enumerate(rows) if row.size != self.size), None)
        if bad is not None or len(rows) != envs.num_envs:
            shape = np.asarray(masks[bad], dtype=object).shape if bad is not None else (len(rows),)
            raise EnvStepError(
                f"action mask of environment {self.env_id!r} on rank {self.rank}, sub-environment "
                f"{bad if bad is not None else '?'} at its step {own_step}, has {shape} entries; expected "
                f"{self.size} booleans per sub-environment for this action space (flat, True = valid).")
        mask = torch.from_numpy(np.stack(rows))
        valid = self.head.components_valid(mask)
        if not bool(valid.all()):
            index = int((~valid).nonzero()[0, 0])
            whole = isinstance(self.head, CategoricalHead)  # one choice per action: no components
            raise EnvStepError(
                f"action mask of environment {self.env_id!r} on rank {self.rank}, sub-environment {index} at its "
                f"step {own_step}, allows no action{'' if whole else ' for some component'}: "
                f"{mask[index].tolist()}. Every state needs at least one valid action.")
        return mask
