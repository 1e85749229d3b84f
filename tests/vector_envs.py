"""Vector environments for the tests, reached from configs as ``tests.vector_envs.<name>`` (``data.vectorization``).

``counters``: two counting environments (tests/conftest.py's ``CounterEnv``: observation = steps so far, reward 1
per step) in a ``SyncVectorEnv`` with the autoreset mode asked for: sub-environment 0 terminates at its 3rd step,
sub-environment 1 is truncated there by its time limit.
"""

import gymnasium as gym
from gymnasium.vector import AutoresetMode


def counters(num_envs: int = 2, autoreset_mode: str = "NextStep") -> gym.vector.VectorEnv:
    assert num_envs == 2, "one terminating and one truncated counter"
    makers = [lambda: gym.make("LitPPOTest/CounterEnds-v0", max_episode_steps=10),
              lambda: gym.make("LitPPOTest/Counter-v0")]
    return gym.vector.SyncVectorEnv(makers, autoreset_mode=AutoresetMode(autoreset_mode))


def cartpole(num_envs: int, autoreset_mode: str = "NextStep") -> gym.vector.VectorEnv:
    """CartPole in a SyncVectorEnv with the given autoreset mode (gymnasium's default is next-step)."""
    return gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * num_envs,
                                    autoreset_mode=AutoresetMode(autoreset_mode))


def not_a_vector_env(num_envs: int):
    return gym.make("CartPole-v1")


def three_envs(num_envs: int):
    return cartpole(3)


def disabled(num_envs: int):
    return cartpole(num_envs, "Disabled")
