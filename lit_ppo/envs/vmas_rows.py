"""A VMAS scenario as rows of one vector env, natively: VMAS already steps all its copies in one torch call.

VMAS (``pip install 'lit_ppo[vmas]'``) simulates ``copies`` environments of ``agents`` agents as batched torch
tensors; this adapter lays them out as :class:`lit_ppo.envs.multiagent.ParallelEnvRows` does PettingZoo's, row
``copy * agents + i`` being agent ``i`` of that copy, so the collector, GAE, the loss, the overlap and DDP take them
unchanged and every step count counts agent steps. ``agent_id`` and ``global_state`` (the concatenated observations
of the copy's agents: VMAS has no ``state()``) are appended as there; only the critic reads the global state.
``groups`` gives each group of agents its own network, as there (:mod:`lit_ppo.envs.agent_groups`): agents of
different observation sizes (``simple_adversary``, ``simple_tag``) or numbers of Discrete choices.

VMAS ends all agents of a copy together (its ``done`` is per copy), so no row is ever inactive; the copy's episode,
its agents' returns summed, is in ``info["team_episode"]`` on its first row. A copy resets in the
step its episode ends (gymnasium's same-step autoreset: the final observation is in ``info["final_obs"]``), with
``reset_at``; ``max_steps`` truncates, a scenario's own end terminates.

VMAS draws its randomness from a generator state of its own (``Environment.vmas_random_state``, swapped in and out
around each call), so the learner's torch, numpy and random generators are not touched. That state is one per
process, shared by every VMAS env in it. The adapter pickles (its simulator by cloudpickle, that generator state
beside it), so a checkpoint holds the episodes in progress and a resumed run continues them bit for bit.
"""

import copy
import pickle
import warnings
from typing import Any, Optional

import cloudpickle
import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from lit_ppo.envs.agent_groups import AgentGroups, GroupsConfig, agent_groups
from lit_ppo.errors import ConfigError


def _make_vmas(scenario: str, copies: int, continuous_actions: bool, max_steps: Optional[int],
               env_kwargs: Optional[dict[str, Any]]):
    try:
        import vmas
    except ImportError:
        raise ConfigError("data.vectorization: lit_ppo.envs.vmas_rows.vmas_rows needs VMAS: "
                          "pip install 'lit_ppo[vmas]'.") from None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            made = vmas.make_env(scenario, num_envs=copies, device="cpu", continuous_actions=continuous_actions,
                                 max_steps=max_steps, terminated_truncated=True, **(env_kwargs or {}))
    except Exception as err:  # an unknown scenario name, a keyword of the wrong type
        raise ConfigError(f"data.vectorization: VMAS cannot make scenario {scenario!r} with env_kwargs "
                          f"{env_kwargs or {}}: {type(err).__name__}: {err}") from None
    for warning in caught:
        # VMAS 1.5 only warns about a keyword its scenario does not read: a misspelt setting would train silently
        if "not used by the scenario" in str(warning.message):
            raise ConfigError(f"data.vectorization.env_kwargs: VMAS scenario {scenario!r} does not read "
                              f"{str(warning.message).split(' passed')[0].removeprefix('Scenario kwargs: ')}; "
                              "check the names against the scenario's make_world.")
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return made


def _gymnasium_space(space) -> gym.spaces.Space:
    """VMAS's spaces are OpenAI gym's (``gym.spaces``): the same Box or Discrete as gymnasium's."""
    if type(space).__name__ == "Box":
        return gym.spaces.Box(np.asarray(space.low, np.float32), np.asarray(space.high, np.float32),
                              dtype=np.float32)
    if type(space).__name__ == "Discrete":
        return gym.spaces.Discrete(int(space.n))
    return space  # anything else is refused below, by name


class VmasRows(gym.vector.VectorEnv):
    """``copies`` copies of a VMAS scenario as one vector env of ``copies * agents`` rows (see the module)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "records_episode_statistics": True}

    def __init__(self, copies: int, scenario: str, env_kwargs: Optional[dict[str, Any]] = None,
                 continuous_actions: bool = True, max_steps: Optional[int] = None, agent_id: bool = False,
                 global_state: bool = False, groups: Optional[GroupsConfig] = None):
        if max_steps is None:
            raise ConfigError("data.vectorization.max_steps: a VMAS scenario may never end by itself; give its "
                              "episodes a length (e.g. max_steps: 100, BenchMARL's default for VMAS tasks).")
        self.vmas = _make_vmas(scenario, copies, continuous_actions, max_steps, env_kwargs)
        self.copies, self.agent_id, self.global_state = copies, agent_id, global_state
        self.agents = [agent.name for agent in self.vmas.agents]
        spaces = {agent: (_gymnasium_space(self.vmas.observation_space[i]), _gymnasium_space(self.vmas.action_space[i]))
                  for i, agent in enumerate(self.agents)}
        self.groups: Optional[AgentGroups] = None
        if groups is not None:
            try:
                self.groups = agent_groups(groups, self.agents, spaces, scenario)
            except ConfigError:
                self.close()
                raise
            self.group_hots = torch.as_tensor(self.groups.one_hots)  # [agents, groups], leading each agent's row
            obs_space, action_space = self.groups.observation_space, self.groups.action_space
        else:
            odd = [a for a in self.agents if spaces[a] != spaces[self.agents[0]]]
            if odd:
                self.close()
                raise ConfigError(f"data.vectorization: the agents of VMAS scenario {scenario!r} do not share one "
                                  f"observation and action space ({self.agents[0]}: {spaces[self.agents[0]]}; "
                                  f"{odd[0]}: {spaces[odd[0]]}), which one shared network needs; give each group of "
                                  "agents its own network with data.vectorization.groups: prefix (or {group: [agent, "
                                  "...]}).")
            obs_space, action_space = spaces[self.agents[0]]
        if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1
                and isinstance(action_space, (gym.spaces.Box, gym.spaces.Discrete))):
            self.close()
            raise ConfigError(f"data.vectorization: VMAS scenario {scenario!r} observes {obs_space} and acts in "
                              f"{action_space}; this adapter takes flat Box observations and Box or Discrete "
                              "actions (VMAS's defaults: no dict spaces, no multi-discrete actions).")
        n = len(self.agents)
        parts = [(obs_space.low, obs_space.high)]
        if self.groups is not None:  # the network's group leads the row
            parts.insert(0, (np.zeros(len(self.groups.names)), np.ones(len(self.groups.names))))
        if agent_id:
            parts.append((np.zeros(n), np.ones(n)))
        self.local_size = None  # global_state: how many leading inputs are the agent's own (the actor's)
        if global_state:
            self.local_size = sum(len(low) for low, _ in parts)
            parts.append((np.concatenate([spaces[a][0].low for a in self.agents]),
                          np.concatenate([spaces[a][0].high for a in self.agents])))
        self.single_observation_space = gym.spaces.Box(np.concatenate([p[0] for p in parts]).astype(np.float32),
                                                       np.concatenate([p[1] for p in parts]).astype(np.float32),
                                                       dtype=np.float32)
        self.single_action_space = action_space
        self.num_envs = copies * n
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(action_space, self.num_envs)
        self.returns, self.lengths = np.zeros(self.num_envs), np.zeros(self.num_envs, np.int64)

    # Pickling: the collector saves its environments in checkpoints, so a resume continues their episodes. A VMAS
    # scenario's class is made at run time, which pickle cannot name, so the simulator travels as cloudpickle's
    # bytes (a gymnasium dependency); VMAS's generator state (``Environment.vmas_random_state``, one per process)
    # travels with it, so a resumed run draws the same resets as an uninterrupted one (tests/test_vmas.py).
    def __getstate__(self) -> dict[str, Any]:
        from vmas.simulator.environment.environment import Environment

        return {**self.__dict__, "vmas": cloudpickle.dumps(self.vmas),
                "vmas_random_state": copy.deepcopy(Environment.vmas_random_state)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from vmas.simulator.environment.environment import Environment

        Environment.vmas_random_state[:] = state.pop("vmas_random_state")
        self.__dict__.update(state, vmas=pickle.loads(state["vmas"]))

    @property
    def group_spec(self) -> Optional[dict[str, Any]]:
        """The groups as plain data for the env spec (the network reads it), or None: one network for all."""
        return None if self.groups is None else self.groups.spec

    def _rows(self, observations: list[torch.Tensor]) -> np.ndarray:
        """VMAS's per-agent ``[copies, size]`` observations as ``[copies * agents, inputs]`` rows."""
        observations = [o.float() for o in observations]
        copies, n = observations[0].shape[0], len(observations)
        if self.groups is None:
            parts = [torch.stack(observations, dim=1)]  # [copies, agents, size]
        else:  # [group one-hot | own observation zero-padded to the largest]
            width = self.groups.observation_space.shape[0]
            own = torch.stack([torch.nn.functional.pad(o, (0, width - o.shape[1])) for o in observations], dim=1)
            parts = [self.group_hots.expand(copies, n, -1), own]
        if self.agent_id:
            parts.append(torch.eye(n).expand(copies, n, n))
        if self.global_state:
            parts.append(torch.cat(observations, dim=1).unsqueeze(1).expand(copies, n, -1))
        return torch.cat(parts, dim=-1).reshape(copies * n, -1).numpy()

    def reset(self, *, seed: Optional[Any] = None, options: Optional[dict] = None):
        if seed is not None:  # one seed for the batch: VMAS seeds its own generator, not the learner's
            self.vmas.seed(int(seed[0] if isinstance(seed, (list, tuple)) else seed))
        self.returns[:], self.lengths[:] = 0.0, 0
        return self._rows(self.vmas.reset()), {}

    def step(self, actions):
        n = len(self.agents)
        actions = torch.as_tensor(np.asarray(actions)).reshape(self.copies, n, *self.single_action_space.shape)
        observations, rewards, terminated, truncated, _ = self.vmas.step([actions[:, i] for i in range(n)])
        rewards = torch.stack(rewards, dim=1).reshape(-1).numpy().astype(np.float32)
        terminated = terminated.repeat_interleave(n).numpy()
        truncated = truncated.repeat_interleave(n).numpy()
        obs = self._rows(observations)
        self.returns += rewards
        self.lengths += 1
        ended = terminated | truncated
        info: dict[str, Any] = {}
        if ended.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            for row in np.flatnonzero(ended):
                final_obs[row] = obs[row]
            info.update(final_obs=final_obs, _final_obs=ended.copy(),
                        episode={"r": np.where(ended, self.returns, 0.0), "l": np.where(ended, self.lengths, 0),
                                 "t": np.zeros(self.num_envs)}, _episode=ended.copy())
            team = np.zeros(self.num_envs)
            team[::n] = self.returns.reshape(self.copies, n).sum(axis=1)
            team_ended = np.zeros(self.num_envs, bool)
            team_ended[::n] = ended[::n]
            info.update(team_episode={"r": team}, _team_episode=team_ended)
            for copy in np.flatnonzero(ended[::n]):
                observations = self.vmas.reset_at(int(copy))
            obs = self._rows(observations)  # reset_at answers every copy's current observations
            self.returns[ended], self.lengths[ended] = 0.0, 0
        return obs, rewards, terminated, truncated, info


def vmas_rows(num_envs: int, scenario: str, env_kwargs: Optional[dict[str, Any]] = None,
              continuous_actions: bool = True, max_steps: Optional[int] = None, agent_id: bool = False,
              global_state: bool = False, groups: Optional[GroupsConfig] = None) -> VmasRows:
    """``data.vectorization``'s factory: ``num_envs`` rows (copies x agents) of VMAS scenario ``scenario`` (e.g.
    ``balance``, ``navigation``) made with ``env_kwargs`` (the scenario's own keywords, e.g. ``n_agents``),
    ``continuous_actions`` and episodes of ``max_steps``; ``agent_id``, ``global_state`` and ``groups`` (one network
    per group of agents, e.g. ``prefix`` for ``simple_adversary``'s adversary and agents) as in
    :func:`lit_ppo.envs.multiagent.parallel_rows`. ``num_envs`` must be a multiple of the number of agents."""
    probe = _make_vmas(scenario, 1, continuous_actions, max_steps, env_kwargs)
    agents = probe.n_agents
    if num_envs % agents:
        raise ConfigError(f"data.num_envs: VMAS scenario {scenario!r} has {agents} agents, each a row of the vector "
                          f"env, so num_envs must be a multiple of {agents} (copies x agents); got {num_envs}. The "
                          "same holds for data.eval_episodes, whose environments are rows too.")
    return VmasRows(num_envs // agents, scenario, env_kwargs, continuous_actions, max_steps, agent_id, global_state,
                    groups)
