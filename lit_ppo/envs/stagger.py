"""Staggered first episodes (``data.stagger_episodes``): each environment's first episode is cut short by a
different number of steps, so that environments whose episodes all last the same time limit do not play the same
phase of their episodes in every rollout.

Why: vector environments start together, and where episodes never end before the time limit (Swimmer, HalfCheetah)
they stay in step for the whole run. With 4 envs x 512 steps and 1,000-step episodes, every rollout then holds the
same half of the episode in all environments, alternating from one rollout to the next (the start from rest, then
the steady stroke), instead of the whole episode. One env x 2,048 steps always holds whole episodes.
"""

from typing import Any, Optional

import gymnasium as gym


STAGGERABLE = ("sync", "async")  # the vectorizations that take a gymnasium wrapper per environment


def staggered(stagger_episodes: Optional[bool], vectorization: Any) -> bool:
    """``data.stagger_episodes`` resolved: ``None`` (the default) staggers wherever the vectorization can."""
    return vectorization in STAGGERABLE if stagger_episodes is None else stagger_episodes


def refusal(vectorization: str) -> str:
    """The reason ``data.stagger_episodes: true`` is refused with ``vectorization`` (a description of it), and the
    fix: one message wherever it is checked."""
    return (f"cuts each environment's first episode with a gymnasium wrapper, which data.vectorization {vectorization} "
            "does not take; set data.vectorization to sync or async, or data.stagger_episodes: false.")


def first_episode_limit(time_limit: Optional[int], index: int, total_envs: int) -> Optional[int]:
    """The length of environment ``index``'s first episode, of ``total_envs`` (all ranks), spread evenly over one time
    limit: environment ``i`` ends it ``i * time_limit // total_envs`` steps early, environment 0 not at all. ``None``
    where the time limit is unknown (nothing to stagger by)."""
    if not time_limit or time_limit <= 0:
        return None
    return time_limit - index * time_limit // total_envs


class StaggeredStart(gym.Wrapper):
    """Truncates the environment's first episode after ``first_episode_steps`` steps (unless it ended before);
    later episodes pass through unchanged. The cut is a truncation, so the step's value is bootstrapped as at a
    time limit; the short episode shows in the episode statistics once."""

    def __init__(self, env: gym.Env, first_episode_steps: int) -> None:
        super().__init__(env)
        if first_episode_steps <= 0:
            raise ValueError(f"first_episode_steps must be positive, got {first_episode_steps}")
        self.first_episode_steps = first_episode_steps
        self.steps = 0
        self.first_episode = True

    def reset(self, **kwargs: Any):
        if self.first_episode:  # a reset before the cut (e.g. a resumed run's fresh start) starts the count again
            self.steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.first_episode:
            self.steps += 1
            if self.steps >= self.first_episode_steps:
                truncated = True
            if terminated or truncated:
                self.first_episode = False
        return obs, reward, terminated, truncated, info
