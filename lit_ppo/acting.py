"""Where the rollout's policy runs. Environments always step on the CPU; the policy that acts for them is
either a CPU copy of the learner's network (refreshed once per rollout) or the learner's network itself on
its accelerator (one observation upload and one action download per step), chosen by ``actor_device``.
"""

import copy
import statistics
import time
from typing import Optional

import torch
from torch import Tensor

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
        head = self.policy.head
        action = head.mode(params) if deterministic else head.sample(params, generator)
        return action, head.log_prob(params, action), value

    def value(self, obs: Tensor) -> Tensor:
        return self.policy.value(obs.to(self.device, non_blocking=True)).cpu()

    def scale_rewards(self, *tensors: Optional[Tensor]) -> Tensor:
        moved = [t.to(self.device) if t is not None else None for t in tensors]
        return self.policy.scale_rewards(*moved).cpu()


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
