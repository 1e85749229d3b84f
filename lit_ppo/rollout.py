"""Playing the vector environments on the CPU into one rollout, with GAE computed at its end."""

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from lit_ppo.advantages import compute_gae
from lit_ppo.errors import EnvStepError
from lit_ppo.networks import ActorCritic


@dataclass
class RolloutStats:
    """What one rollout measured, for logging: finished episodes and where the time went."""

    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    env_ms: float = 0.0  # stepping the environments
    act_ms: float = 0.0  # policy inference for acting (and bootstrap values)
    gae_ms: float = 0.0


class RolloutCollector:
    """Owns a vector env and its current observation; ``collect`` plays ``num_steps`` steps of every env.

    Storage is preallocated once and overwritten by each rollout. Everything here runs on the CPU under
    ``torch.inference_mode``; the learner's device is never touched.
    """

    def __init__(
        self,
        envs,
        num_steps: int,
        gamma: float,
        gae_lambda: float,
        seed: int,
        generator: torch.Generator,
        env_id: str = "?",
        rank: int = 0,
    ) -> None:
        self.envs, self.num_steps, self.gamma, self.gae_lambda = envs, num_steps, gamma, gae_lambda
        self.generator, self.env_id, self.rank = generator, env_id, rank
        self.num_envs = envs.num_envs
        self.steps_taken = 0  # environment steps of this collector (this rank)
        T, N = num_steps, self.num_envs
        obs_shape = envs.single_observation_space.shape
        self.buffers = {
            "obs": torch.zeros((T, N, *obs_shape), dtype=torch.float32),
            "actions": torch.zeros((T, N), dtype=torch.long),
            "logprobs": torch.zeros((T, N)),
            "values": torch.zeros((T, N)),
        }
        self.rewards = torch.zeros((T, N))
        self.terminated = torch.zeros((T, N), dtype=torch.bool)
        self.dones = torch.zeros((T, N), dtype=torch.bool)
        self.final_values = torch.zeros((T, N))  # V(final observation) where an episode was truncated
        self.truncated_only = torch.zeros((T, N), dtype=torch.bool)
        obs, _ = self._call("reset", seed=seed)
        self.next_obs = torch.as_tensor(obs, dtype=torch.float32)

    def _call(self, method: str, *args: Any, **kwargs: Any):
        try:
            return getattr(self.envs, method)(*args, **kwargs)
        except Exception as err:
            raise EnvStepError(
                f"environment {self.env_id!r} raised in {method}() on rank {self.rank} at environment step "
                f"{self.steps_taken} of this rank: {type(err).__name__}: {err}"
            ) from err

    def collect(self, policy: ActorCritic) -> tuple[dict[str, Tensor], RolloutStats]:
        """Play one rollout with ``policy`` (on the CPU) and return flat ``[T * N, ...]`` training data."""
        stats = RolloutStats()
        last_value = self._play(policy, stats)
        buf = self.buffers
        t0 = time.perf_counter()
        next_values = torch.cat([buf["values"][1:], last_value.unsqueeze(0)])
        next_values = torch.where(self.truncated_only, self.final_values, next_values)
        advantages, returns = compute_gae(
            self.rewards, buf["values"], next_values, self.terminated, self.dones, self.gamma, self.gae_lambda
        )
        # Copies made outside inference mode: the learner's autograd may save them for backward.
        data = {k: v.flatten(0, 1).clone() for k, v in buf.items()}
        data["advantages"], data["returns"] = advantages.flatten(), returns.flatten()
        stats.gae_ms = (time.perf_counter() - t0) * 1e3
        return data, stats

    @torch.inference_mode()
    def _play(self, policy: ActorCritic, stats: RolloutStats) -> Tensor:
        """Step every env ``num_steps`` times into the buffers; returns V(observation after the last step)."""
        buf = self.buffers
        self.final_values.zero_()
        for step in range(self.num_steps):
            buf["obs"][step] = self.next_obs
            t0 = time.perf_counter()
            action, logprob, value = policy.act(self.next_obs, self.generator)
            t1 = time.perf_counter()
            obs, reward, terminated, truncated, info = self._call("step", action.numpy())
            t2 = time.perf_counter()
            buf["actions"][step], buf["logprobs"][step], buf["values"][step] = action, logprob, value
            self.rewards[step] = torch.from_numpy(np.asarray(reward, dtype=np.float32))
            self.terminated[step] = torch.from_numpy(terminated)
            self.dones[step] = torch.from_numpy(terminated | truncated)
            truncated_only = truncated & ~terminated
            if truncated_only.any():
                # Bootstrap a time-limit end from the value of the real final observation.
                idx = np.flatnonzero(truncated_only)
                final_obs = torch.as_tensor(np.stack(info["final_obs"][idx]), dtype=torch.float32)
                self.final_values[step, idx] = policy.value(final_obs)
            self.truncated_only[step] = torch.from_numpy(truncated_only)
            if "_episode" in info:
                done_idx = np.flatnonzero(info["_episode"])
                stats.episode_returns += info["episode"]["r"][done_idx].tolist()
                stats.episode_lengths += info["episode"]["l"][done_idx].tolist()
            self.next_obs = torch.as_tensor(obs, dtype=torch.float32)
            stats.act_ms += (time.perf_counter() - t2 + t1 - t0) * 1e3
            stats.env_ms += (t2 - t1) * 1e3
        self.steps_taken += self.num_steps * self.num_envs
        t0 = time.perf_counter()
        last_value = policy.value(self.next_obs)
        stats.act_ms += (time.perf_counter() - t0) * 1e3
        return last_value.clone()

    def close(self) -> None:
        self.envs.close()
