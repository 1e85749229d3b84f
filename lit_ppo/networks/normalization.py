"""Running statistics for observation normalization and reward scaling, kept as buffers of the policy."""

from collections.abc import Sequence
from typing import Callable, Optional

import torch
from torch import Tensor, nn

CLIP = 10.0  # normalized observations and scaled rewards clip to +-10 (as SB3's VecNormalize)


class RunningMeanStd(nn.Module):
    """Running mean and (population) variance of a stream of batches, merged with Chan et al.'s parallel formula.

    Buffers, so they are in ``state_dict`` and checkpoints, follow the policy to its device, and reach the CPU
    acting copy through ``load_state_dict``. Before the first update (count 0) it is the identity (mean 0, var 1).
    Kept in float64, as SB3's ``RunningMeanStd``: a float32 count stops adding a rollout exactly past 2^24
    (~16.7M) samples, and the merged moments drift. ``normalize`` returns the input's dtype.
    """

    def __init__(self, shape: Sequence[int] = (), epsilon: float = 1e-8) -> None:
        super().__init__()
        self.epsilon = epsilon
        self.register_buffer("mean", torch.zeros(tuple(shape), dtype=torch.float64))
        self.register_buffer("var", torch.ones(tuple(shape), dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor, reduce_sum: Optional[Callable[[Tensor], Tensor]] = None) -> None:
        """Merge the batch ``x`` (``[..., *shape]``); ``reduce_sum`` (an all-reduce) first pools every rank's batch."""
        x = x.reshape(-1, *self.mean.shape).double()  # float64 sums where x lives (the CPU rollout)
        count = torch.tensor(float(x.shape[0]), dtype=torch.float64)
        mean = x.mean(0)
        m2 = (x - mean).square().sum(0)
        count, mean, m2 = (t.to(self.mean.device) for t in (count, mean, m2))
        if reduce_sum is not None:
            total = reduce_sum(count.clone())
            pooled_mean = reduce_sum(count * mean) / total
            m2 = reduce_sum(m2 + count * (mean - pooled_mean).square())
            count, mean = total, pooled_mean
        total = self.count + count
        delta = mean - self.mean
        m2_total = self.var * self.count + m2 + delta.square() * self.count * count / total
        self.mean.add_(delta * count / total)
        self.var.copy_(m2_total / total)
        self.count.copy_(total)

    def normalize(self, x: Tensor) -> Tensor:
        mean, std = self.mean.to(x.dtype), torch.sqrt(self.var + self.epsilon).to(x.dtype)
        return ((x - mean) / std).clamp(-CLIP, CLIP)
