"""Playing the vector environments on the CPU into one rollout, with GAE computed at its end."""

import pickle
from typing import Any, Optional

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import Tensor

from lit_ppo.collection.action_masks import ActionMaskReader
from lit_ppo.collection.clock import PhaseClock
from lit_ppo.collection.episodes import FinishedEpisodes
from lit_ppo.collection.gae import compute_gae, explained_variance
from lit_ppo.envs.make import autoreset_mode, rebuilt_by_pickling
from lit_ppo.errors import EnvStepError, where_env_failed
from lit_ppo.envs.spaces import action_spec, action_tensor_layout, actions_to_env, batch_observations, observations_to_tensor


class RolloutCollector:
    """Owns a vector env and its current observation; ``collect`` plays ``num_steps`` steps of every env.

    Storage is preallocated once and overwritten by each rollout. Everything here runs on the CPU under
    ``torch.inference_mode``; the learner's device is never touched.

    Both of gymnasium's autoreset modes, read from the vector env's metadata:

    - ``SAME_STEP``: a sub-environment resets within the step that ends its episode; a truncated episode's final
      observation arrives in ``info["final_obs"]`` and is bootstrapped from there.
    - ``NEXT_STEP``: the step after an episode ends is a *reset step*: the action is ignored, the reward is 0 and
      the observation is the new episode's first. Its sample gets weight 0 (``weights``); the step that ended the
      episode returned the true final observation, which is then the reset step's input, so a truncation is
      bootstrapped from the value acting computed there, and GAE's trace is cut at the end as always.

    A recurrent policy (``state_size > 0``) acts from each environment's recurrent state, which the collector keeps
    between steps and rollouts; an input that begins an episode is flagged in ``episode_starts`` (same-step: the
    step after a done; next-step: the step after a reset step), and the policy zeroes the state there.
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
        return_scaling: bool = False,
        action_masks: Optional[ActionMaskReader] = None,
        state_size: int = 0,
        keep_trace: bool = False,
    ) -> None:
        self.envs, self.num_steps, self.gamma, self.gae_lambda = envs, num_steps, gamma, gae_lambda
        self.keep_trace = keep_trace  # the rollout carries what recomputing its advantages needs
        self.generator, self.env_id, self.rank, self.seed = generator, env_id, rank, seed
        self.normalize_reward, self.return_scaling = normalize_reward, return_scaling
        self.masks = action_masks  # None: no invalid-action masks
        self.obs_space, self.action_space = envs.single_observation_space, envs.single_action_space
        self.num_envs = envs.num_envs
        self.next_step = autoreset_mode(envs) == AutoresetMode.NEXT_STEP
        self.workers = isinstance(envs.unwrapped, gym.vector.AsyncVectorEnv)  # subprocesses that report errors
        self.steps_taken = 0  # environment steps of this collector (this rank)
        self.iterations = 0  # rollouts collected
        # The run's environment steps (all ranks) so far: advanced by the rollout dataset, which knows the rollout
        # size of all ranks; kept here so that the checkpoint of this collector holds it.
        self.env_steps = 0
        T, N = num_steps, self.num_envs
        obs, info = self._call("reset", seed=seed)
        self.next_obs = observations_to_tensor(obs, self.obs_space)
        self.next_mask = self._read_masks(info)
        self.next_active = self._read_active(info)
        action_shape, action_dtype = action_tensor_layout(action_spec(self.action_space))
        self.buffers = {
            # Observations as the policy takes them (uint8 images stay uint8: the learner scales them).
            "obs": torch.zeros((T, N, *self.next_obs.shape[1:]), dtype=self.next_obs.dtype),
            "actions": torch.zeros((T, N, *action_shape), dtype=action_dtype),
            "logprobs": torch.zeros((T, N)),
            "values": torch.zeros((T, N)),
        }
        if self.masks is not None:  # the masks each action was chosen under, re-applied by the update
            self.buffers["action_masks"] = torch.zeros((T, N, self.masks.size), dtype=torch.bool)
        # What the environments return, written from numpy each step into arrays that these tensors share
        # memory with: a numpy row write costs a tenth of a tensor conversion and copy, ~30% of a CartPole step.
        self._np = {"rewards": np.zeros((T, N), np.float32), "terminated": np.zeros((T, N), bool),
                    "dones": np.zeros((T, N), bool), "truncated_only": np.zeros((T, N), bool)}
        self.rewards, self.terminated, self.dones, self.truncated_only = (
            torch.from_numpy(self._np[key]) for key in ("rewards", "terminated", "dones", "truncated_only"))
        self.final_values = torch.zeros((T, N))  # V(final observation) where an episode was truncated (same-step)
        # Rows the vector env marks inactive (``info["active"]``: an agent whose episode ended before its copy's,
        # lit_ppo.envs.multiagent): their steps get weight 0, as a next-step reset step does.
        self.active = torch.ones((T, N), dtype=torch.bool)
        self.final_obs: list[tuple[int, Tensor]] = []  # keep_trace: (sample index, final observations) per step
        # NEXT_STEP: which sub-environments ended their episode at the previous rollout's last step (and so reset
        # at this rollout's first)
        self.resets_next = torch.zeros(N, dtype=torch.bool)
        # Recurrent policies: the state after each env's latest input, and which envs' next input starts an episode
        self.state = torch.zeros((N, state_size)) if state_size else None
        self.starts_next = torch.ones(N, dtype=torch.bool)
        if state_size:
            self.buffers["episode_starts"] = torch.zeros((T, N), dtype=torch.bool)
        # Discounted return of the raw rewards per step, from which the policy's reward scale is estimated.
        self.reward_returns = torch.zeros((T, N))
        self.running_return = torch.zeros(N)

    def _call(self, method: str, *args: Any, **kwargs: Any):
        # An AsyncVectorEnv prints its failing worker's traceback through gymnasium's logger before raising; the
        # error below says the same in one line (the worker's index included), so that logger is quiet meanwhile.
        level = gym.logger.min_level
        try:
            if self.workers:
                gym.logger.min_level = gym.logger.ERROR + 10  # above ERROR: nothing (gymnasium has no setter)
            return getattr(self.envs, method)(*args, **kwargs)
        except Exception as err:
            raise EnvStepError(
                f"environment {self.env_id!r} raised in {method}() on rank {self.rank}"
                f"{where_env_failed(self.envs, err, self.steps_taken)}: "
                f"{type(err).__name__}: {err}. The last checkpoint saved before it is unchanged."
            ) from err
        finally:
            gym.logger.min_level = level

    @staticmethod
    def _read_active(info: dict[str, Any]) -> Optional[Tensor]:
        return torch.as_tensor(info["active"], dtype=torch.bool) if "active" in info else None

    def _read_masks(self, info: dict[str, Any]) -> Optional[Tensor]:
        return None if self.masks is None else self.masks.read(self.envs, info, self.steps_taken // self.num_envs)

    def collect(self, policy, clock: Optional[PhaseClock] = None) -> dict[str, Any]:
        """Play one rollout with ``policy`` (acting on the CPU) and return the :class:`lit_ppo.collection.rollout.Rollout` fields
        it fills: flat ``[T * N, ...]`` samples, the finished episodes and ``reward_returns``; its phases on ``clock``
        (``env_ms``, ``act_ms``, ``gae_ms``; none: not timed for anyone)."""
        clock = PhaseClock() if clock is None else clock
        initial_state = self.state.clone() if self.state is not None else torch.zeros((0, 0))
        see = getattr(getattr(self.envs, "unwrapped", self.envs), "see_learner", None)
        if see is not None:  # self-play: the env keeps snapshots of the policy (lit_ppo.envs.turn_based)
            see(policy, self.iterations)
        last_value, episodes = self._play(policy, clock)
        with clock.phase("gae_ms"):
            data = self._finish(policy, initial_state, last_value)
        data.update(episodes.rollout_fields())
        data["nonfinite"] = tuple(name for name, values in (("rewards", self.rewards), ("observations", data["obs"]))
                                  if values.is_floating_point() and not bool(values.isfinite().all()))
        self.iterations += 1
        return data

    def _finish(self, policy, initial_state: Tensor, last_value: Tensor) -> dict[str, Any]:
        """GAE over the played steps, and the samples flattened as the rollout holds them."""
        buf = self.buffers
        next_values = torch.cat([buf["values"][1:], last_value.unsqueeze(0)])
        if not self.next_step:  # next-step: the next step's input already is the final observation
            next_values = torch.where(self.truncated_only, self.final_values, next_values)
        # data.return_scaling: the critic's values are in units of the returns' std; GAE runs on raw rewards in raw
        # units, and the critic's targets go back to its units (Tianshou's return_scaling).
        scale = policy.value_scale() if self.return_scaling else torch.ones(())
        weights, real = self._sample_weights()
        # Scaled by the statistics the policy had while acting (the learner updates them after the updates); the
        # first rollout's stand-in variance is over the real transitions' returns (not a reset step's zeros).
        reward_returns = self.reward_returns.flatten()[real]
        rewards = policy.scale_rewards(self.rewards, reward_returns) if self.normalize_reward else self.rewards
        advantages, returns = compute_gae(
            rewards, buf["values"] * scale, next_values * scale, self.terminated, self.dones, self.gamma,
            self.gae_lambda
        )
        if self.return_scaling:  # what the learner merges into the statistics, after its updates
            reward_returns = returns.flatten()[real]
        returns = returns / scale
        # Copies made outside inference mode: the learner's autograd may save them for backward.
        data: dict[str, Any] = {k: v.flatten(0, 1).clone() for k, v in buf.items()}
        data["advantages"], data["returns"] = advantages.flatten(), returns.flatten()
        data["recurrent_states"] = initial_state
        data["weights"] = weights
        data["reward_returns"] = (reward_returns.clone() if self.normalize_reward or self.return_scaling
                                  else torch.zeros(0))
        data["explained_variance"] = explained_variance(data["values"][real], data["returns"][real])
        data["value_scale"] = float(scale)
        if self.keep_trace:
            data.update(self._trace(rewards))
        return data

    def _trace(self, rewards: Tensor) -> dict[str, Any]:
        """The rollout's fields for recomputing its advantages with other values (:func:`recompute_gae`)."""
        index = [torch.as_tensor(i) for i, _ in self.final_obs]
        final_obs = [obs for _, obs in self.final_obs]
        return {
            "rewards": rewards.flatten().clone(), "terminated": self.terminated.flatten().clone(),
            "dones": self.dones.flatten().clone(), "next_obs": self.next_obs.clone(),
            "final_index": torch.cat(index) if index else torch.zeros(0, dtype=torch.long),
            "final_obs": torch.cat(final_obs) if final_obs else torch.zeros((0, *self.next_obs.shape[1:]),
                                                                           dtype=self.next_obs.dtype),
            "gamma": self.gamma, "gae_lambda": self.gae_lambda,
        }

    def _sample_weights(self) -> tuple[Tensor, Any]:
        """``(weights, real)``: the sample weights, 0 at a next-step reset step (the step after a done) and at an
        inactive row's step, and the index of the real transitions; same-step with every row active: no weights,
        every sample real."""
        if not self.next_step and self.next_active is None:
            return torch.zeros(0), slice(None)
        weights = torch.ones(self.active.numel())
        if self.next_step:
            resets = torch.cat([self.resets_next.unsqueeze(0), self.dones[:-1]])
            self.resets_next = self.dones[-1].clone()
            weights = (~resets).float().flatten()
        if self.next_active is not None:
            weights = weights * self.active.flatten().float()
        return weights, weights > 0

    @torch.inference_mode()
    def _play(self, policy, clock: PhaseClock) -> tuple[Tensor, FinishedEpisodes]:
        """Step every env ``num_steps`` times into the buffers; returns V(observation after the last step) and the
        episodes that finished."""
        self.final_values.zero_()
        self.final_obs.clear()
        episodes = FinishedEpisodes()
        acting, stepping = clock.phase("act_ms"), clock.phase("env_ms")
        for step in range(self.num_steps):
            with acting:
                env_action = self._act(policy, step)
            with stepping:
                info = self._step_envs(step, env_action, episodes)
            with acting:
                self._after_step(policy, step, info)
        with acting:
            recurrent = () if self.state is None else (self.state, self.starts_next)
            last_value = policy.value(self.next_obs, *recurrent).clone()
        return last_value, episodes

    def _act(self, policy, step: int) -> Any:
        """Store step ``step``'s inputs (observation, masks, episode starts), act on them and store the action, its
        log-probability and the value; returns the action as the environments take it."""
        buf = self.buffers
        buf["obs"][step] = self.next_obs
        if self.next_active is not None:
            self.active[step] = self.next_active
        extra: dict[str, Tensor] = {}
        if self.masks is not None:
            buf["action_masks"][step] = extra["action_mask"] = self.next_mask
        if self.state is not None:
            buf["episode_starts"][step] = extra["starts"] = self.starts_next
            extra["state"] = self.state
        action, logprob, value, state = policy.act(self.next_obs, self.generator, **extra)
        if state is not None:
            self.state = state
        buf["actions"][step], buf["logprobs"][step], buf["values"][step] = action, logprob, value
        return actions_to_env(action, self.action_space)

    def _step_envs(self, step: int, env_action: Any, episodes: FinishedEpisodes) -> dict[str, Any]:
        """Step every environment; store the rewards and how each step ended, the next inputs, and the finished
        episodes' returns and lengths; returns the step's ``info``."""
        arrays = self._np
        self.steps_taken += self.num_envs
        obs, reward, terminated, truncated, info = self._call("step", env_action)
        arrays["rewards"][step] = reward
        arrays["terminated"][step] = terminated
        np.logical_or(terminated, truncated, out=arrays["dones"][step])
        np.logical_and(truncated, ~terminated, out=arrays["truncated_only"][step])
        self.next_obs = observations_to_tensor(obs, self.obs_space)
        if self.masks is not None:
            self.next_mask = self._read_masks(info)
        if self.next_active is not None:
            self.next_active = self._read_active(info)
        if self.state is not None:  # same-step: the obs after a done is a first one; next-step: after a reset step
            ended = self.dones[step] if not self.next_step else (self.dones[step - 1] if step else self.resets_next)
            self.starts_next = ended.clone()
        episodes.read(info)
        return info

    def _after_step(self, policy, step: int, info: dict[str, Any]) -> None:
        """The raw discounted return (for the reward scale), and same-step's bootstrap of a time-limit end from the
        value of the real final observation (next-step: the reset step's input already is that observation)."""
        if self.normalize_reward:
            self.running_return.mul_(self.gamma).add_(self.rewards[step])
            self.reward_returns[step] = self.running_return
            self.running_return.masked_fill_(self.dones[step], 0.0)
        truncated_only = self._np["truncated_only"][step]
        if not self.next_step and truncated_only.any():
            idx = np.flatnonzero(truncated_only)
            final_obs = batch_observations(info["final_obs"][idx], self.obs_space)
            recurrent = () if self.state is None else (self.state[idx],)  # the state after the episode's last input
            self.final_values[step, idx] = policy.value(final_obs, *recurrent)
            if self.keep_trace:
                self.final_obs.append((torch.from_numpy(step * self.num_envs + idx), final_obs.clone()))

    # -- checkpointing (at rollout boundaries) -------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What continuing the same episodes needs: the environments themselves (pickled, when they can be),
        the current observation, the sampling generator, counters and the running return."""
        state = {
            "next_obs": self.next_obs.clone(),
            "generator": self.generator.get_state(),
            "steps_taken": self.steps_taken,
            "iterations": self.iterations,
            "env_steps": self.env_steps,
            "running_return": self.running_return.clone(),
            "resets_next": self.resets_next.clone(),
            "next_mask": None if self.next_mask is None else self.next_mask.clone(),
            "next_active": None if self.next_active is None else self.next_active.clone(),
            "recurrent_state": None if self.state is None else self.state.clone(),
            "starts_next": self.starts_next.clone(),
        }
        try:
            if rebuilt := rebuilt_by_pickling(self.envs):  # it would pickle, but not as the episodes in progress
                raise pickle.PicklingError(rebuilt)
            state["envs"] = pickle.dumps(self.envs)
        except Exception as err:  # e.g. AsyncVectorEnv (subprocesses), an env holding a handle, an EzPickle env
            state["envs"] = None
            state["envs_error"] = f"{type(err).__name__}: {err}"
        return state

    def load_state_dict(self, state: dict[str, Any]) -> Optional[str]:
        """Continue from ``state``; returns a note when the environments had to be reset instead (they could not be
        saved, or the checkpoint ran another number of them: ``data.num_envs`` may change on resume)."""
        self.generator.set_state(state["generator"])
        self.steps_taken, self.iterations = state["steps_taken"], state["iterations"]
        self.env_steps = state.get("env_steps") or 0  # None: an older checkpoint (the dataset derives it)
        saved = int(state["running_return"].shape[0])
        if saved != self.num_envs:
            why = f"data.num_envs is {self.num_envs} and rank {self.rank} of the checkpoint ran {saved} environments"
        elif state.get("envs") is not None:
            # Pickled by this package when saving; checkpoints are trusted files, as any pickle is.
            self.envs.close()
            self.envs = pickle.loads(state["envs"])
            self.running_return.copy_(state["running_return"])
            self.next_obs = state["next_obs"]
            self.resets_next = state["resets_next"].clone()
            self.next_mask = state["next_mask"]
            if state.get("next_active") is not None:  # absent: a checkpoint from before agents
                self.next_active = state["next_active"].clone()
            if self.state is not None:
                self.state, self.starts_next = state["recurrent_state"].clone(), state["starts_next"].clone()
            return None
        else:
            why = f"the environments of rank {self.rank} could not be saved ({state.get('envs_error')})"
        # Deterministic fallback: a reset seeded from (seed, rank, iteration); episodes restart.
        seed = int(np.random.SeedSequence([self.seed, self.rank, self.iterations]).generate_state(1)[0])
        obs, info = self._call("reset", seed=seed)
        self.next_obs = observations_to_tensor(obs, self.obs_space)
        self.next_mask = self._read_masks(info)
        self.next_active = self._read_active(info)
        self.running_return.zero_()
        self.resets_next.zero_()
        if self.state is not None:
            self.state.zero_()
        self.starts_next.fill_(True)
        return (f"{why}; they were reset with a seed derived from (seed={self.seed}, rank={self.rank}, "
                f"iteration={self.iterations}), so episodes in progress at the checkpoint restart.")

    def close(self) -> None:
        self.envs.close()

