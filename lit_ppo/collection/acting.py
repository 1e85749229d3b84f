"""Where the rollout's policy runs. Environments always step on the CPU; the policy that acts for them is, by
``actor_device``:

- ``cpu``: the learner's network itself when it is on the CPU, else a CPU copy of it that this module owns,
  refreshed from the learner's weights once per rollout;
- ``learner`` (or ``cuda``): the learner's network on its accelerator, one observation upload and one action
  download per step;
- ``auto``: measured once, at the first rollout, on its observations (the decision and both timings are logged).
"""

import copy
import statistics
import time
from typing import Optional

import torch
from torch import Tensor

from lit_ppo.errors import ConfigError
from lit_ppo.networks.actor_critic import ActorCritic

ACTOR_DEVICES = ("cpu", "auto", "learner", "cuda")


def check_actor_device(choice: str) -> None:
    """``model.actor_device``'s one check (``PPOModule`` calls it at construction, before anything runs)."""
    if choice not in ACTOR_DEVICES:
        raise ConfigError(f"model.actor_device: must be one of {ACTOR_DEVICES}, got {choice!r}.")


def _device(policy: ActorCritic) -> torch.device:
    return next(policy.parameters()).device


class LearnerDevicePolicy:
    """Acts with the learner's network on its device; sampling stays on the CPU with the rollout's generator,
    so the random stream is the same wherever the network runs."""

    def __init__(self, policy: ActorCritic) -> None:
        self.policy = policy
        self.state_size = policy.state_size

    def initial_state(self, n: int) -> Optional[Tensor]:
        return torch.zeros((n, self.state_size)) if self.state_size else None  # on the CPU, as what it returns

    def act(
        self, obs: Tensor, generator: Optional[torch.Generator] = None, deterministic: bool = False,
        action_mask: Optional[Tensor] = None, state: Optional[Tensor] = None, starts: Optional[Tensor] = None,
    ) -> tuple[Tensor, Tensor, Tensor, Optional[Tensor]]:
        params, value, state = self.policy(*self._to_device(obs, state, starts))
        params, value = params.cpu(), value.cpu()  # sampling on the CPU, with the rollout's generator
        return (*self.policy.choose(params, generator, deterministic, action_mask), value,
                None if state is None else state.cpu())

    def value(self, obs: Tensor, state: Optional[Tensor] = None, starts: Optional[Tensor] = None) -> Tensor:
        return self.policy.value(*self._to_device(obs, state, starts)).cpu()

    def _to_device(self, *tensors: Optional[Tensor]) -> list[Optional[Tensor]]:
        device = _device(self.policy)
        return [None if t is None else t.to(device, non_blocking=True) for t in tensors]

    def value_scale(self) -> Tensor:
        return self.policy.value_scale()

    def scale_rewards(self, *tensors: Optional[Tensor]) -> Tensor:
        moved = [t.to(_device(self.policy)) if t is not None else None for t in tensors]
        return self.policy.scale_rewards(*moved).cpu()


class PolicyPlacement:
    """The acting side of one process: given the learner's policy once, it returns, at each rollout, the policy
    to act with (:meth:`for_rollout`), holding the latest weights.

    Args:
        policy: the learner's :class:`ActorCritic` (wherever the Trainer puts it; its parameters are read, never
            written).
        choice: ``model.actor_device``, one of :data:`ACTOR_DEVICES`.
    """

    def __init__(self, policy: ActorCritic, choice: str = "cpu") -> None:
        check_actor_device(choice)
        self.policy, self.choice = policy, choice
        self.copy: Optional[ActorCritic] = None  # the CPU copy, made at the first rollout that needs one
        self.decided: Optional[str] = None if choice == "auto" else ("cpu" if choice == "cpu" else "learner")
        self.measured: dict[str, float] = {}  # actor_device=auto's timings, handed out once

    def check_placement(self) -> None:
        device = _device(self.policy)
        if self.choice == "cuda" and device.type != "cuda":  # also caught before the Trainer runs, by the CLI
            raise ConfigError(
                f"model.actor_device: 'cuda' needs a CUDA learner, but the Trainer put the learner on {device} "
                f"(CUDA available: {torch.cuda.is_available()}). Use 'cpu' or 'auto', or --trainer.accelerator gpu."
            )

    def for_rollout(self, sample_obs: Tensor):
        """What acts for the next rollout (an object with ``act``, ``value``, ``scale_rewards`` and ``value_scale``)."""
        self.check_placement()
        if self.decided is None:
            self.decided = self._decide(sample_obs)
        return self._acting(self.decided)

    def for_evaluation(self):
        """What plays evaluation episodes: as :meth:`for_rollout`, where ``auto`` not yet measured means the CPU."""
        self.check_placement()
        return self._acting(self.decided or "cpu")

    def _acting(self, decision: str):
        if _device(self.policy).type == "cpu":  # a CPU learner acts itself: nothing to copy
            return self.policy
        if decision == "learner":
            return LearnerDevicePolicy(self.policy)
        self.copy = cpu_copy(self.policy, self.copy)
        return self.copy

    def _decide(self, sample_obs: Tensor) -> str:
        if _device(self.policy).type == "cpu":
            _announce("lit_ppo: actor_device=auto: the learner is on the CPU: acting with it directly.")
            return "cpu"
        return self._measure(sample_obs)

    def take_measurements(self) -> dict[str, float]:
        """actor_device=auto's timings (microseconds) the first time they exist, then nothing."""
        measured, self.measured = self.measured, {}
        return measured

    def _measure(self, sample_obs: Tensor) -> str:
        device = _device(self.policy)
        self.copy = cpu_copy(self.policy, self.copy)
        cpu_s = time_acting(self.copy, sample_obs)
        dev_s = time_acting(LearnerDevicePolicy(self.policy), sample_obs)
        decision = "cpu" if cpu_s <= dev_s else "learner"
        _announce(
            f"lit_ppo: actor_device=auto: acting on a batch of {sample_obs.shape[0]} takes {cpu_s * 1e6:.0f} us on the "
            f"CPU and {dev_s * 1e6:.0f} us on {device} (transfers included): acting on "
            f"{'the CPU' if decision == 'cpu' else device}."
        )
        self.measured = {"act_cpu_us": cpu_s * 1e6, "act_learner_us": dev_s * 1e6}
        return decision


def _announce(message: str) -> None:
    # Lightning is imported here, not at the top: the collector process (lit_ppo.collection.overlap.worker) imports this
    # module and never announces, and Lightning's import alone is ~3 s of its start-up.
    from lightning.pytorch.utilities import rank_zero_info

    rank_zero_info(message)


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
    state = policy.initial_state(obs.shape[0])
    times = []
    for _ in range(repeats + 3):
        start = time.perf_counter()
        policy.act(obs, generator, state=state)
        times.append(time.perf_counter() - start)
    return statistics.median(times[3:])
