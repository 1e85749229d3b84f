"""Agent groups: which agents share one network, and how agents of different spaces become rows of one vector env.

``data.vectorization.groups`` (:func:`lit_ppo.envs.multiagent.parallel_rows`) gives each group of agents its own
actor and critic (:class:`lit_ppo.networks.grouped.GroupedLayers`), as BenchMARL's and TorchRL's agent groups do:

- ``prefix``: agents grouped by their name up to the last ``_`` (``speaker_0`` -> ``speaker``; PettingZoo's and
  TorchRL's convention), so that ``adversary_0, adversary_1, agent_0`` are two groups;
- ``{group: [agent, ...]}``: named groups; every agent in exactly one (one group per agent: no sharing at all).

Agents of one group must share their spaces; groups may differ in the size of a flat Box observation (each row is
zero-padded to the largest) and in the number of a Discrete action space's choices (the action space is the
largest, and a group's network never gives the choices it does not have any probability). The group is a one-hot at
the front of every row, which the network reads to pick the group's layers.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import gymnasium as gym
import numpy as np

from lit_ppo.errors import ConfigError

GroupsConfig = Union[str, Mapping[str, Sequence[str]]]


@dataclass(frozen=True)
class AgentGroups:
    """The groups of a multi-agent env's agents and the row layout they give (see the module)."""

    names: tuple[str, ...]  # the groups, in the order of their one-hot
    of_agent: tuple[int, ...]  # each agent's group, in the env's agent order
    actions: Optional[tuple[int, ...]]  # each group's Discrete choices when they differ (None: one action space)
    observation_space: gym.spaces.Box  # one agent's own part of a row: its observation padded to the largest
    action_space: gym.spaces.Space

    @property
    def spec(self) -> dict[str, Any]:
        """The groups as plain data for the env spec, which the network reads (``env_spec["groups"]``)."""
        return {"names": list(self.names), "of_agent": list(self.of_agent),
                "actions": None if self.actions is None else list(self.actions)}

    @property
    def one_hots(self) -> np.ndarray:
        """``[agents, groups]``: each agent's group as the one-hot that leads its row."""
        return np.eye(len(self.names), dtype=np.float32)[list(self.of_agent)]

    def own_part(self, observation: Any) -> np.ndarray:
        """The agent's observation as its row's own part: flattened, zero-padded to the largest group's size."""
        flat = np.asarray(observation, np.float32).reshape(-1)
        out = np.zeros(self.observation_space.shape[0], np.float32)
        out[:flat.size] = flat
        return out


def _group_names(config: GroupsConfig, agents: Sequence[str], env: str) -> dict[str, list[str]]:
    if config == "prefix":
        names: dict[str, list[str]] = {}
        for agent in agents:
            names.setdefault(agent.rsplit("_", 1)[0], []).append(agent)
        return names
    if not isinstance(config, Mapping):
        raise ConfigError(f"data.vectorization.groups: {config!r} is neither 'prefix' nor a mapping "
                          "{group: [agent, ...]}; e.g. groups: prefix groups speaker_0 and listener_0 apart.")
    groups = {str(group): list(members) for group, members in config.items()}
    listed = [agent for members in groups.values() for agent in members]
    unknown = [agent for agent in listed if agent not in agents]
    if unknown:
        raise ConfigError(f"data.vectorization.groups: {env!r} has no agent {unknown[0]!r}; its agents are "
                          f"{list(agents)}.")
    twice = sorted({agent for agent in listed if listed.count(agent) > 1})
    missing = [agent for agent in agents if agent not in listed]
    if twice or missing:
        raise ConfigError(f"data.vectorization.groups: every agent of {env!r} must be in exactly one group; "
                          + (f"{twice} are in several" if twice else f"{missing} are in none") + ".")
    if any(not members for members in groups.values()):
        raise ConfigError("data.vectorization.groups: a group has no agents; list at least one agent in each.")
    return groups


def agent_groups(config: GroupsConfig, agents: Sequence[str],
                 spaces: Mapping[str, tuple[gym.spaces.Space, gym.spaces.Space]], env: str) -> AgentGroups:
    """The groups ``config`` makes of ``agents`` (in order), whose ``spaces`` are ``{agent: (observation, action)}``;
    a group whose agents differ, or groups a shared row cannot hold, are refused by name."""
    members = _group_names(config, agents, env)
    names = tuple(members)
    of_agent = tuple(next(g for g, name in enumerate(names) if agent in members[name]) for agent in agents)
    observations, actions = [], []
    for name in names:
        first = members[name][0]
        odd = [agent for agent in members[name] if spaces[agent] != spaces[first]]
        if odd:
            raise ConfigError(f"data.vectorization.groups: group {name!r} holds agents of different spaces "
                              f"({first}: {spaces[first]}; {odd[0]}: {spaces[odd[0]]}); one network per group needs "
                              "one space: put them in groups of their own.")
        observations.append(spaces[first][0])
        actions.append(spaces[first][1])
    flat = [isinstance(space, gym.spaces.Box) and len(space.shape) == 1 for space in observations]
    if not all(flat):
        odd = names[flat.index(False)]
        raise ConfigError(f"data.vectorization.groups: group {odd!r} observes {observations[flat.index(False)]}; "
                          "groups take flat Box observations (padded to one row size).")
    sizes = tuple(space.shape[0] for space in observations)
    low, high = np.zeros(max(sizes), np.float32), np.zeros(max(sizes), np.float32)
    for space in observations:  # a column holds each group's own input or padding (0)
        low[:space.shape[0]] = np.minimum(low[:space.shape[0]], space.low)
        high[:space.shape[0]] = np.maximum(high[:space.shape[0]], space.high)
    action_space, choices = actions[0], None
    if any(space != actions[0] for space in actions):
        if not all(isinstance(space, gym.spaces.Discrete) and space.start == 0 for space in actions):
            described = ", ".join(f"{name}: {space}" for name, space in zip(names, actions))
            raise ConfigError(f"data.vectorization.groups: the groups act in different spaces ({described}); "
                              "groups may differ only in a Discrete space's number of choices (Box actions of "
                              "different sizes are not supported; a VMAS scenario acts in Discrete spaces with "
                              "continuous_actions: false).")
        choices = tuple(int(space.n) for space in actions)
        action_space = gym.spaces.Discrete(max(choices))
    return AgentGroups(names, of_agent, choices, gym.spaces.Box(low, high, dtype=np.float32), action_space)
