"""One set of layers per agent group (:mod:`lit_ppo.envs.agent_groups`): each row goes through its group's layers.

The group is a one-hot at the front of the row. Every group's layers see every row and the one-hot keeps each row's
own group's output, exactly (the others are multiplied by 0): with the few small groups multi-agent tasks have, one
batched pass per group is simpler than gathering rows by group, and it exports to ONNX as it is. A group with fewer
Discrete choices than the shared action space gets the missing choices masked out, so it never takes them.
"""

from collections.abc import Sequence
from typing import Optional

import torch
from torch import Tensor, nn

from lit_ppo.networks.distributions import MASKED_LOGIT


class GroupedLayers(nn.Module):
    """``layers[g]`` for the rows of group ``g``; ``choices[g]``: how many of the outputs group ``g`` has (the rest
    are masked out by :meth:`mask`), None: all of them for every group."""

    def __init__(self, layers: Sequence[nn.Module], outputs: int, choices: Optional[Sequence[int]] = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        valid = torch.ones(len(layers), outputs, dtype=torch.bool)
        for group, n in enumerate(choices or []):
            valid[group, n:] = False
        # derived from the env spec, so not part of the saved state
        self.register_buffer("valid", valid, persistent=False)
        self.partial = choices is not None

    def forward(self, x: Tensor, groups: Tensor) -> Tensor:
        """``x`` ``[B, in]`` through the layers of each row's group; ``groups`` ``[B, G]`` the rows' one-hots."""
        outs = torch.stack([layers(x) for layers in self.layers])  # [G, B, out]
        return torch.einsum("gbo,bg->bo", outs, groups.to(outs.dtype))

    def mask(self, params: Tensor, groups: Tensor) -> Tensor:
        """``params`` with the choices each row's group does not have made impossible (identity when all have all)."""
        if not self.partial:
            return params
        return torch.where(self.valid[groups.argmax(-1)], params, MASKED_LOGIT)
