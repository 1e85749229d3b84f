"""Small PettingZoo parallel environments for the multi-agent tests (``module:factory`` for
``lit_ppo.envs.multiagent.parallel_rows``).

``signal``: each agent observes a random bit (one-hot of 2) and earns 1 for answering it (action = bit), 0 otherwise;
every agent is truncated after ``length`` steps together. Agent ``i``'s bit at step t of an episode seeded s is
drawn from ``np.random.default_rng`` on reset, so the tests can write the rewards down. ``odd_space``: the last agent
observes 3 values (its bit's one-hot and a 0); ``odd_actions``: it has 3 choices, of which 2 always earns 0;
``contrary``: it earns 1 for answering the other bit (1 - bit), so that it must act unlike the others. An action
outside an agent's space raises.
"""

import functools

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv


class Signal(ParallelEnv):
    metadata = {"name": "signal_v0"}

    def __init__(self, agents: int = 2, length: int = 8, leave_early: bool = False, odd_space: bool = False,
                 odd_actions: bool = False, contrary: bool = False):
        self.possible_agents = [f"agent_{i}" for i in range(agents)]
        self.length, self.leave_early, self.odd_space = length, leave_early, odd_space
        self.odd_actions, self.contrary = odd_actions, contrary
        self.rng = np.random.default_rng(0)

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        size = 3 if self.odd_space and agent == self.possible_agents[-1] else 2
        return gym.spaces.Box(0.0, 1.0, (size,), np.float32)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return gym.spaces.Discrete(3 if self.odd_actions and agent == self.possible_agents[-1] else 2)

    def _observe(self):
        self.bits = {a: int(self.rng.integers(2)) for a in self.agents}
        return {a: np.eye(2, self.observation_space(a).shape[0], dtype=np.float32)[b] for a, b in self.bits.items()}

    def _answer(self, agent):
        return 1 - self.bits[agent] if self.contrary and agent == self.possible_agents[-1] else self.bits[agent]

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents, self.t = list(self.possible_agents), 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions):
        for a in self.agents:
            if not self.action_space(a).contains(np.int64(actions[a])):
                raise ValueError(f"{a} cannot take action {actions[a]!r}: its space is {self.action_space(a)}")
        rewards = {a: float(actions[a] == self._answer(a)) for a in self.agents}
        self.t += 1
        truncated = {a: self.t >= self.length for a in self.agents}
        terminated = {a: self.leave_early and a == self.agents[-1] and self.t == 3 for a in self.agents}
        observations = self._observe()
        infos = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        return observations, rewards, terminated, truncated, infos


def signal(**kwargs):
    return Signal(**kwargs)


def learned_signal_return(tmp_path, init_args: dict) -> float:
    """The evaluation return per agent after a short seeded fit on ``parallel_rows(signal, **init_args)``: the
    multi-agent learning checks' one recipe (8 rows, 4,096 agent steps, lr 3e-3)."""
    import lightning as L

    from lit_ppo import PPODataModule, PPOModule

    L.seed_everything(0)
    vectorization = {"class_path": "lit_ppo.envs.multiagent.parallel_rows",
                     "init_args": {"env": "tests.multiagent_envs:signal", **init_args}}
    dm = PPODataModule("signal", vectorization=vectorization, num_envs=8, num_steps=16, total_timesteps=4096,
                       minibatch_size=64, update_epochs=4, eval_episodes=4, normalize_reward=False, seed=0)
    model = PPOModule(env_spec=dm.env_spec, lr=3e-3)
    quiet = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    L.Trainer(max_epochs=-1, enable_checkpointing=False, limit_val_batches=0, **quiet).fit(model, dm)
    [result] = L.Trainer(**quiet).validate(model, dm, verbose=False)
    return result["eval/return_mean"]
