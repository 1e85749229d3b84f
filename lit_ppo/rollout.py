"""Playing the vector environments on the CPU into one rollout, with GAE computed at its end."""

import pickle
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from lit_ppo.advantages import compute_gae
from lit_ppo.envs import action_layout, actions_to_env, final_observations_to_tensor, observations_to_tensor
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
    collect_ms: float = 0.0  # the whole rollout: the above plus bookkeeping
    sync_ms: float = 0.0  # refreshing the acting policy's weights from the learner


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
        normalize_reward: bool = False,
    ) -> None:
        self.envs, self.num_steps, self.gamma, self.gae_lambda = envs, num_steps, gamma, gae_lambda
        self.generator, self.env_id, self.rank = generator, env_id, rank
        self.normalize_reward = normalize_reward
        self.obs_space, self.action_space = envs.single_observation_space, envs.single_action_space
        self.num_envs = envs.num_envs
        self.seed = seed
        self.steps_taken = 0  # environment steps of this collector (this rank)
        # The last 100 finished episodes of this rank, for rollout/return_mean (as SB3's ep_rew_mean).
        self.recent_returns: deque = deque(maxlen=100)
        self.recent_lengths: deque = deque(maxlen=100)
        T, N = num_steps, self.num_envs
        obs, _ = self._call("reset", seed=seed)
        self.next_obs = observations_to_tensor(obs, self.obs_space)
        action_shape, action_dtype = action_layout(self.action_space)
        self.buffers = {
            # Observations as the policy takes them (uint8 images stay uint8: the learner scales them).
            "obs": torch.zeros((T, N, *self.next_obs.shape[1:]), dtype=self.next_obs.dtype),
            "actions": torch.zeros((T, N, *action_shape), dtype=action_dtype),
            "logprobs": torch.zeros((T, N)),
            "values": torch.zeros((T, N)),
        }
        # What the environments return, written from numpy each step into arrays that these tensors share
        # memory with: a numpy row write costs a tenth of a tensor conversion and copy, ~30% of a CartPole step.
        self._np = {"rewards": np.zeros((T, N), np.float32), "terminated": np.zeros((T, N), bool),
                    "dones": np.zeros((T, N), bool), "truncated_only": np.zeros((T, N), bool)}
        self.rewards, self.terminated, self.dones, self.truncated_only = (
            torch.from_numpy(self._np[key]) for key in ("rewards", "terminated", "dones", "truncated_only"))
        self.final_values = torch.zeros((T, N))  # V(final observation) where an episode was truncated
        # Discounted return of the raw rewards per step, from which the policy's reward scale is estimated.
        self.reward_returns = torch.zeros((T, N))
        self.running_return = torch.zeros(N)

    def _call(self, method: str, *args: Any, **kwargs: Any):
        try:
            return getattr(self.envs, method)(*args, **kwargs)
        except Exception as err:
            raise EnvStepError(
                f"environment {self.env_id!r} raised in {method}() on rank {self.rank} at environment step "
                f"{self.steps_taken} of this rank: {type(err).__name__}: {err}. The last checkpoint saved before "
                "it is unchanged."
            ) from err

    def collect(self, policy: ActorCritic) -> tuple[dict[str, Tensor], RolloutStats]:
        """Play one rollout with ``policy`` (on the CPU) and return flat ``[T * N, ...]`` training data."""
        stats = RolloutStats()
        last_value = self._play(policy, stats)
        buf = self.buffers
        t0 = time.perf_counter()
        next_values = torch.cat([buf["values"][1:], last_value.unsqueeze(0)])
        next_values = torch.where(self.truncated_only, self.final_values, next_values)
        # Scaled by the statistics the policy had while acting; the module updates them after the updates.
        rewards = policy.scale_rewards(self.rewards, self.reward_returns) if self.normalize_reward else self.rewards
        advantages, returns = compute_gae(
            rewards, buf["values"], next_values, self.terminated, self.dones, self.gamma, self.gae_lambda
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
            self.steps_taken += self.num_envs
            obs, reward, terminated, truncated, info = self._call("step", actions_to_env(action, self.action_space))
            t2 = time.perf_counter()
            buf["actions"][step], buf["logprobs"][step], buf["values"][step] = action, logprob, value
            arrays = self._np
            arrays["rewards"][step] = reward
            arrays["terminated"][step] = terminated
            np.logical_or(terminated, truncated, out=arrays["dones"][step])
            truncated_only = np.logical_and(truncated, ~terminated, out=arrays["truncated_only"][step])
            if self.normalize_reward:
                self.running_return.mul_(self.gamma).add_(self.rewards[step])
                self.reward_returns[step] = self.running_return
                self.running_return.masked_fill_(self.dones[step], 0.0)
            if truncated_only.any():
                # Bootstrap a time-limit end from the value of the real final observation.
                idx = np.flatnonzero(truncated_only)
                final_obs = final_observations_to_tensor(info["final_obs"][idx], self.obs_space)
                self.final_values[step, idx] = policy.value(final_obs)
            if "_episode" in info:
                done_idx = np.flatnonzero(info["_episode"])
                returns, lengths = (info["episode"][key][done_idx].tolist() for key in ("r", "l"))
                stats.episode_returns += returns
                stats.episode_lengths += lengths
                self.recent_returns.extend(returns)
                self.recent_lengths.extend(lengths)
            self.next_obs = observations_to_tensor(obs, self.obs_space)
            stats.act_ms += (time.perf_counter() - t2 + t1 - t0) * 1e3
            stats.env_ms += (t2 - t1) * 1e3
        t0 = time.perf_counter()
        last_value = policy.value(self.next_obs)
        stats.act_ms += (time.perf_counter() - t0) * 1e3
        return last_value.clone()

    # -- checkpointing (at rollout boundaries) -------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What continuing the same episodes needs: the environments themselves (pickled, when they can be),
        the current observation, the sampling generator, counters and running statistics."""
        state = {
            "next_obs": self.next_obs.clone(),
            "generator": self.generator.get_state(),
            "steps_taken": self.steps_taken,
            "recent_returns": list(self.recent_returns),
            "recent_lengths": list(self.recent_lengths),
        }
        if hasattr(self, "running_return"):
            state["running_return"] = self.running_return.clone()
        try:
            state["envs"] = pickle.dumps(self.envs)
        except Exception as err:  # e.g. AsyncVectorEnv (subprocesses) or an env holding a handle
            state["envs"] = None
            state["envs_error"] = f"{type(err).__name__}: {err}"
        return state

    def load_state_dict(self, state: dict[str, Any], iteration: int) -> Optional[str]:
        """Continue from ``state``; returns a note when the environments had to be reset instead."""
        self.generator.set_state(state["generator"])
        self.steps_taken = state["steps_taken"]
        self.recent_returns.extend(state["recent_returns"])
        self.recent_lengths.extend(state["recent_lengths"])
        if "running_return" in state and hasattr(self, "running_return"):
            self.running_return.copy_(state["running_return"])
        if state.get("envs") is not None:
            # Pickled by this package when saving; checkpoints are trusted files, as any pickle is.
            self.envs.close()
            self.envs = pickle.loads(state["envs"])
            self.next_obs = state["next_obs"]
            return None
        # Deterministic fallback: a reset seeded from (seed, rank, iteration); episodes restart.
        seed = int(np.random.SeedSequence([self.seed, self.rank, iteration]).generate_state(1)[0])
        obs, _ = self._call("reset", seed=seed)
        self.next_obs = observations_to_tensor(obs, self.obs_space)
        if hasattr(self, "running_return"):
            self.running_return.zero_()
        return (f"the environments of rank {self.rank} could not be saved ({state.get('envs_error')}); they were "
                f"reset with a seed derived from (seed={self.seed}, rank={self.rank}, iteration={iteration}), so "
                "episodes in progress at the checkpoint restart.")

    def close(self) -> None:
        self.envs.close()
