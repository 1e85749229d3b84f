"""Where and how the rollout's policy runs. Environments always step on the CPU; the policy that acts for them
is either a CPU copy of the learner's network (refreshed once per rollout) or the learner's network itself on
its accelerator (one observation upload and one action download per step), chosen by ``actor_device``. On the
CPU, acting goes through :class:`FusedActing`: actor and critic in one pass.
"""

import copy
import statistics
import time
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_ppo.networks import ActorCritic

ACTOR_DEVICES = ("cpu", "auto", "learner", "cuda")


class DeviceActor:
    """Acts with the learner's network on its device; sampling stays on the CPU with the rollout's generator,
    so the random stream is the same wherever the network runs."""

    def __init__(self, policy: ActorCritic, device: torch.device) -> None:
        self.policy, self.device = policy, device

    def act(
        self, obs: Tensor, generator: Optional[torch.Generator] = None, deterministic: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        params, value = self.policy(obs.to(self.device, non_blocking=True))
        params, value = params.cpu(), value.cpu()
        return (*self.policy.head.choose(params, generator, deterministic), value)

    def value(self, obs: Tensor) -> Tensor:
        return self.policy.value(obs.to(self.device, non_blocking=True)).cpu()

    def scale_rewards(self, *tensors: Optional[Tensor]) -> Tensor:
        moved = [t.to(self.device) if t is not None else None for t in tensors]
        return self.policy.scale_rewards(*moved).cpu()


class FusedActing:
    """Acts with ``policy``'s current weights, running actor and critic as one network: their first layers
    stacked, the later ones block-diagonal, so each layer is one matrix product instead of two.

    At acting batch sizes (a rollout's ``num_envs``) a small MLP layer's call costs more than its arithmetic:
    a batch of 8 CartPole observations acts in ~27 us instead of ~45 us. Above ``MAX_BATCH`` the block-diagonal
    layers' wasted multiplications by zero cost more than the calls saved, so larger batches use the policy
    itself. Built once per rollout from the weights of the latest update; the results equal the policy's up to
    float rounding (sums of the same products, in another order).
    """

    MAX_BATCH = 64

    def __init__(self, policy: ActorCritic) -> None:
        self.policy = policy
        actor = [layer for layer in policy.actor if isinstance(layer, nn.Linear)]
        critic = [layer for layer in policy.critic if isinstance(layer, nn.Linear)]
        with torch.no_grad():
            self.weights = [torch.cat([actor[0].weight, critic[0].weight])]
            self.weights += [torch.block_diag(a.weight, c.weight) for a, c in zip(actor[1:], critic[1:])]
            self.biases = [torch.cat([a.bias, c.bias]) for a, c in zip(actor, critic)]
        self.num_params = actor[-1].out_features

    def __call__(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Distribution parameters and values, as ``ActorCritic.forward``."""
        if obs.shape[0] > self.MAX_BATCH:
            return self.policy(obs)
        x = self.policy.encoder(obs)
        last = len(self.weights) - 1
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            x = F.linear(x, weight, bias)
            x = torch.tanh(x) if i < last else x
        params, value = x[:, : self.num_params].float(), x[:, self.num_params].float()
        if self.policy.log_std is not None:
            params = torch.cat([params, self.policy.log_std.float().expand_as(params)], -1)
        return params, value

    def act(
        self, obs: Tensor, generator: Optional[torch.Generator] = None, deterministic: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """As :meth:`ActorCritic.act`."""
        params, value = self(obs)
        return (*self.policy.head.choose(params, generator, deterministic), value)

    def value(self, obs: Tensor) -> Tensor:
        return self.policy.value(obs)

    def scale_rewards(self, *tensors: Optional[Tensor]) -> Tensor:
        return self.policy.scale_rewards(*tensors)


def cpu_copy(policy: ActorCritic, cached: Optional[ActorCritic]) -> ActorCritic:
    """A CPU copy of ``policy`` holding its current weights and statistics (one device-to-host copy)."""
    if cached is None:
        cached = copy.deepcopy(policy).cpu()
    cached.load_state_dict(policy.state_dict())
    return cached


@torch.inference_mode()
def time_acting(policy, obs: Tensor, repeats: int = 30) -> float:
    """Median seconds of one acting forward pass (inputs on the CPU, outputs back on the CPU)."""
    generator = torch.Generator().manual_seed(0)
    times = []
    for _ in range(repeats + 3):
        start = time.perf_counter()
        policy.act(obs, generator)
        times.append(time.perf_counter() - start)
    return statistics.median(times[3:])


def choose_actor_device(policy: ActorCritic, device: torch.device, sample_obs: Tensor) -> tuple[str, float, float]:
    """Measure acting at the rollout's batch size on a CPU copy and on ``device`` (transfers included);
    returns ("cpu" or "learner", cpu seconds, device seconds)."""
    cpu_seconds = time_acting(cpu_copy(policy, None), sample_obs)
    device_seconds = time_acting(DeviceActor(policy, device), sample_obs)
    return ("cpu" if cpu_seconds <= device_seconds else "learner"), cpu_seconds, device_seconds
