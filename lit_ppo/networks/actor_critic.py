"""The actor-critic: an observation encoder (built in, or the user's own network), actor and critic layers, and
the distribution head of the action space.

Three shapes, by what the observation is and what the config asks for:

- vector (and mixed Dict/Tuple) observations: separate actor and critic MLPs on the encoded features;
- a lone image: a Nature-CNN trunk shared by actor and critic, with linear heads;
- ``network``: the user's ``nn.Module`` as a shared trunk, with linear heads.

With ``recurrent`` (:mod:`lit_ppo.networks.recurrent`), an LSTM/GRU core sits between the encoder and the actor/critic
layers, shared by both; every pass then takes the recurrent state of each environment and the episode-start flags
of its inputs, and returns the state after them.

Initialization is PPO's reference one: orthogonal, gain sqrt(2) hidden, 0.01 policy output, 1 value output
(``ortho_init: false`` keeps PyTorch's default instead, as Stable-Baselines3's ``ortho_init=False``).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor, nn

from lit_ppo.classpath import ClassPathConfig, resolve
from lit_ppo.networks.distributions import DiagGaussianHead, make_head
from lit_ppo.networks.grouped import GroupedLayers
from lit_ppo.networks.encoders import NormalizedObservation, ObservationEncoder, layer_init
from lit_ppo.errors import ConfigError
from lit_ppo.networks.normalization import CLIP, RunningMeanStd
from lit_ppo.networks.recurrent import RecurrentCore
from lit_ppo.networks.settings import LOG_STD_INIT, NetworkSettings
from lit_ppo.envs.spaces import ActionSpec, BoxSpec, ObservationSpec, spec_from_dict

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}  # NetworkSettings' choices, as layers
# PPOModule's settings that build its policy: what a checkpoint's hyper-parameters rebuild the network from.


def mlp(in_features: int, hidden_sizes: Sequence[int], out_features: int, out_gain: float,
        activation: str = "tanh") -> nn.Sequential:
    """Linear layers with ``activation`` between them, the last one linear with gain ``out_gain``."""
    layers: list[nn.Module] = []
    for size in hidden_sizes:
        layers += [layer_init(nn.Linear(in_features, size), math.sqrt(2)), ACTIVATIONS[activation]()]
        in_features = size
    layers.append(layer_init(nn.Linear(in_features, out_features), out_gain))
    return nn.Sequential(*layers)


class UserTrunk(nn.Module):
    """A user's network behind :class:`NormalizedObservation`: observations in, ``num_features`` features out."""

    def __init__(self, spec: ObservationSpec, network: ClassPathConfig, normalize: bool = False) -> None:
        super().__init__()
        class_path, build = resolve(network, "model.network")
        try:
            self.net = build()
        except Exception as err:
            raise ConfigError(f"model.network: {class_path}(...) raised {type(err).__name__}: {err}") from err
        if not isinstance(self.net, nn.Module):
            raise ConfigError(f"model.network: {class_path} made a {type(self.net).__name__}, not a torch.nn.Module.")
        self.inputs = NormalizedObservation(spec, normalize)
        example = torch.zeros((2, *spec.tensor_shape), dtype=spec.tensor_dtype)
        with torch.no_grad():
            try:
                out = self.net(example)
            except Exception as err:
                raise ConfigError(
                    f"model.network: {class_path} cannot take an observation batch of shape {tuple(example.shape)} "
                    f"and dtype {example.dtype} ({type(err).__name__}: {err}); see docs/networks.md, 'Your own network'."
                ) from err
        if not isinstance(out, Tensor) or out.dim() != 2 or out.shape[0] != 2:
            shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            # The input shape says why, e.g. a 0-d Box observation arrives as [batch], not [batch, 1].
            raise ConfigError(f"model.network: {class_path} must return features of shape [batch, n]; it returned "
                              f"{shape} for a batch of 2 observations, shape {tuple(example.shape)} "
                              f"{str(example.dtype).removeprefix('torch.')}.")
        self.num_features = int(out.shape[1])

    @property
    def obs_rms(self) -> Optional[RunningMeanStd]:
        return self.inputs.obs_rms

    def vector_part(self, obs: Tensor) -> Optional[Tensor]:
        return self.inputs.vector_part(obs)

    def forward(self, obs: Tensor) -> Tensor:
        return self.net(self.inputs(obs))


class ActorCritic(nn.Module):
    """Everything the policy needs at evaluation is in its ``state_dict``: weights, the Gaussian's log-std, and the
    observation / return statistics when ``normalize_obs`` / ``normalize_reward`` (or ``return_scaling``) are on.

    Args:
        observation: the observation spec (:func:`lit_ppo.envs.spaces.observation_spec`).
        action: the action spec.
        hidden_sizes: hidden layers of the actor and of the critic MLP (not used with a shared trunk).
        encoder: ``auto`` (a CNN for uint8 images of at least 36 x 36), ``cnn`` or ``mlp``
            (see :class:`lit_ppo.networks.encoders.ObservationEncoder`).
        activation: of the MLP's hidden layers, ``tanh`` or ``relu``.
        network: the user's trunk, a class path or ``{class_path, init_args}`` (see :class:`UserTrunk`).
        normalize_obs: normalize vector observations by running statistics (clip +-10).
        normalize_reward: keep running statistics of the discounted return, by which rollouts scale rewards.
        return_scaling: keep running statistics of the rollouts' GAE returns; the critic predicts returns divided by
            their std (:meth:`value_scale`), rewards stay raw (Tianshou's ``return_scaling``). Not with
            ``normalize_reward``.
        recurrent: ``{cell: lstm|gru, hidden_size, layers}`` (:class:`lit_ppo.networks.recurrent.RecurrentConfig`), or None.

    The settings are checked by :class:`lit_ppo.networks.settings.NetworkSettings`, once.
        log_std_init: initial log-std of the Gaussian head (continuous actions): the initial std is its exp
            (:data:`lit_ppo.networks.settings.LOG_STD_INIT` by default).
        ortho_init: PPO's orthogonal initialization of the built-in layers; ``False`` keeps PyTorch's default
            ``reset_parameters`` init (a user's ``network`` keeps its own init either way).
        actor_inputs: the actor reads only the first ``actor_inputs`` of a flat observation, the critic all of it
            (MAPPO's centralized critic: an agent's own observation, then the global state;
            :mod:`lit_ppo.envs.multiagent`); from ``env_spec["actor_inputs"]``. None: both read everything.
        groups: one actor and critic per agent group (:mod:`lit_ppo.envs.agent_groups`): the number of groups, whose
            one-hot leads each observation (a Gaussian head then has a log-std per group); from
            ``env_spec["groups"]``. None: one network for every row.
        group_actions: each group's number of Discrete choices where they differ (the rest masked out).
    """

    def __init__(
        self,
        observation: ObservationSpec,
        action: ActionSpec,
        hidden_sizes: Sequence[int] = (64, 64),
        encoder: str = "auto",
        activation: str = "tanh",
        network: Optional[ClassPathConfig] = None,
        normalize_obs: bool = False,
        normalize_reward: bool = False,
        return_scaling: bool = False,
        recurrent: Any = None,
        log_std_init: float = LOG_STD_INIT,
        ortho_init: bool = True,
        actor_inputs: Optional[int] = None,
        groups: Optional[int] = None,
        group_actions: Optional[Sequence[int]] = None,
    ) -> None:
        super().__init__()
        settings = NetworkSettings.parse(hidden_sizes=hidden_sizes, encoder=encoder, activation=activation,
                                         network=network, recurrent=recurrent, log_std_init=log_std_init,
                                         ortho_init=ortho_init)
        hidden_sizes, encoder, activation = list(settings.hidden_sizes), settings.encoder, settings.activation
        self.head = make_head(action)
        if network is not None:
            self.encoder: Union[ObservationEncoder, UserTrunk] = UserTrunk(observation, network, normalize_obs)
            hidden_sizes = []
        else:
            self.encoder = ObservationEncoder(observation, encoder, normalize_obs)
            if self.encoder.image_only:
                hidden_sizes = []  # the CNN is the trunk (CleanRL / baselines Atari PPO)
        n = self.encoder.num_features
        self.core = RecurrentCore(n, settings.recurrent) if settings.recurrent is not None else None
        n = self.core.hidden_size if self.core is not None else n
        self.actor_inputs, self.groups = actor_inputs, groups
        flat = isinstance(observation, BoxSpec) and not observation.image and len(observation.shape) == 1
        plain = flat and network is None and self.core is None
        if actor_inputs is not None and not (plain and 0 < actor_inputs <= n):
            raise ConfigError(f"a centralized critic (actor_inputs {actor_inputs} of {n} features, e.g. "
                              "data.vectorization.global_state) needs a flat vector observation, the built-in MLP "
                              "and no model.recurrent or model.network; turn one of them off.")
        if groups is not None and not (plain and 0 < groups <= n):
            raise ConfigError(f"one network per agent group ({groups} groups, data.vectorization.groups) needs a flat "
                              "vector observation, the built-in MLP and no model.recurrent or model.network; turn "
                              "one of them off.")
        if groups is None:
            self.actor = mlp(actor_inputs or n, hidden_sizes, self.head.num_outputs, 0.01, activation)
            self.critic = mlp(n, hidden_sizes, 1, 1.0, activation)
        else:
            self.actor = GroupedLayers([mlp(actor_inputs or n, hidden_sizes, self.head.num_outputs, 0.01, activation)
                                        for _ in range(groups)], self.head.num_outputs, group_actions)
            self.critic = GroupedLayers([mlp(n, hidden_sizes, 1, 1.0, activation) for _ in range(groups)], 1)
        if not settings.ortho_init:  # the layers built here, back to PyTorch's own init (the user's network is not ours)
            built = [self.actor, self.critic] + ([self.encoder] if network is None else [])
            built += [self.core] if self.core is not None else []
            kinds = (nn.Linear, nn.Conv2d, nn.LSTM, nn.GRU)
            for layer in (m for part in built for m in part.modules() if isinstance(m, kinds)):
                layer.reset_parameters()
        # The Gaussian's state-independent log-std: optimized and saved with the policy; std exp(log_std_init).
        gaussian = isinstance(self.head, DiagGaussianHead)
        shape = (self.head.num_outputs,) if groups is None else (groups, self.head.num_outputs)
        self.log_std = nn.Parameter(torch.full(shape, float(settings.log_std_init))) if gaussian else None
        if normalize_reward and return_scaling:
            raise ConfigError("data.normalize_reward and data.return_scaling both rescale what the critic learns; "
                              "turn one off (Tianshou's MuJoCo recipe: return_scaling true, normalize_reward false).")
        self.return_scaling = return_scaling
        self.return_rms = RunningMeanStd(()) if normalize_reward or return_scaling else None

    @classmethod
    def from_env_spec(cls, env_spec: dict[str, Any], **kwargs: Any) -> "ActorCritic":
        """The policy for ``PPODataModule.env_spec`` (plain data, as checkpoints hold it)."""
        groups = env_spec.get("groups")
        return cls(spec_from_dict(env_spec["observation"]), spec_from_dict(env_spec["action"]),
                   normalize_obs=bool(env_spec.get("normalize_obs")),
                   normalize_reward=bool(env_spec.get("normalize_reward")),
                   return_scaling=bool(env_spec.get("return_scaling")),
                   actor_inputs=env_spec.get("actor_inputs"),
                   groups=len(groups["names"]) if groups else None,
                   group_actions=groups.get("actions") if groups else None, **kwargs)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "ActorCritic":
        """The policy of ``PPOModule(**settings)``: ``settings`` its hyper-parameters (a checkpoint's
        ``hyper_parameters``), ``env_spec`` among them; one way to build it for training and for loading."""
        network = NetworkSettings.from_hparams(settings)
        return cls.from_env_spec(settings["env_spec"], **{f.name: getattr(network, f.name) for f in fields(network)})

    @property
    def state_size(self) -> int:
        """Floats of recurrent state per environment (0: a feed-forward policy)."""
        return self.core.state_size if self.core is not None else 0

    def initial_state(self, n: int) -> Optional[Tensor]:
        """The state of ``n`` environments before their first step (zeros), or None for a feed-forward policy."""
        return self.core.initial_state(n, next(self.parameters()).device) if self.core is not None else None

    def features(self, obs: Tensor, state: Optional[Tensor] = None,
                 starts: Optional[Tensor] = None) -> tuple[Tensor, Optional[Tensor]]:
        """Features for the actor and critic layers, and the recurrent state after ``obs`` (None: feed-forward, or a
        sequence, whose final state nothing needs).

        Recurrent: ``obs`` is ``[T * n, ...]`` step-major (``T`` steps of ``n`` environments; acting: ``T = 1``),
        ``state`` ``[n, state_size]`` the state before the first step, ``starts`` ``[T * n]`` bool, the inputs that
        begin an episode (None: none does)."""
        features = self.encoder(obs)
        if self.core is None:
            return features, None
        if state is None:
            raise ValueError("a recurrent policy needs the recurrent state: pass state=policy.initial_state(n) at "
                             "the first step and the state it returned afterwards")
        n = state.shape[0]
        steps = features.shape[0] // n
        if starts is None:
            starts = torch.zeros(features.shape[0], dtype=torch.bool, device=features.device)
        out, state = self.core(features.view(steps, n, -1), state.to(features.device),
                               starts.to(features.device).view(steps, n))
        return out.reshape(features.shape[0], -1), state

    def forward(self, obs: Tensor, state: Optional[Tensor] = None,
                starts: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Optional[Tensor]]:
        """Distribution parameters and values, both cast to fp32 (autocast may have made them half precision), and
        the recurrent state after ``obs``."""
        features, state = self.features(obs, state, starts)
        actor_features = features if self.actor_inputs is None else features[..., :self.actor_inputs]
        if self.groups is None:
            params = self.actor(actor_features).float()
            log_std = None if self.log_std is None else self.log_std.float().expand_as(params)
        else:
            hot = obs[..., :self.groups].float()  # the raw one-hot: normalized features would blur it
            params = self.actor.mask(self.actor(actor_features, hot).float(), hot)
            log_std = None if self.log_std is None else hot @ self.log_std.float()
        if log_std is not None:
            params = torch.cat([params, log_std], -1)
        return params, self._value(features, obs), state

    def _value(self, features: Tensor, obs: Tensor) -> Tensor:
        out = self.critic(features) if self.groups is None else self.critic(features, obs[..., :self.groups].float())
        return out.squeeze(-1).float()

    def value(self, obs: Tensor, state: Optional[Tensor] = None, starts: Optional[Tensor] = None) -> Tensor:
        return self._value(self.features(obs, state, starts)[0], obs)

    def act(
        self, obs: Tensor, generator: Optional[torch.Generator] = None, deterministic: bool = False,
        action_mask: Optional[Tensor] = None, state: Optional[Tensor] = None, starts: Optional[Tensor] = None,
    ) -> tuple[Tensor, Tensor, Tensor, Optional[Tensor]]:
        """Action, its log-probability, the state value and the recurrent state after ``obs`` (None when
        feed-forward) for a batch of observations; deterministic: the mode (the Gaussian's mean); ``action_mask``:
        only valid actions (see :class:`lit_ppo.networks.distributions.DistributionHead`)."""
        params, value, state = self(obs, state, starts)
        return (*self.choose(params, generator, deterministic, action_mask), value, state)

    def choose(self, params: Tensor, generator: Optional[torch.Generator] = None, deterministic: bool = False,
               action_mask: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        """Action and log-probability from distribution parameters, among the valid actions of ``action_mask``."""
        if action_mask is not None:
            params = self.head.masked(params, action_mask.to(params.device))
        return self.head.choose(params, generator, deterministic)

    def evaluate(self, obs: Tensor, actions: Tensor, action_mask: Optional[Tensor] = None,
                 state: Optional[Tensor] = None, starts: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
        """Log-probability of ``actions``, entropy and value under the current parameters (fp32), under the action
        masks the actions were chosen with; recurrent: over whole sequences from ``state`` (see :meth:`features`)."""
        params, value, _ = self(obs, state, starts)
        if action_mask is not None:
            params = self.head.masked(params, action_mask)
        return (*self.head.log_prob_entropy(params, actions), value)

    # -- normalization statistics -------------------------------------------------------------------------------
    def scale_rewards(self, rewards: Tensor, returns: Optional[Tensor] = None) -> Tensor:
        """Rewards divided by the running std of the discounted return, clipped to +-10 (identity when off).

        Before any statistics exist (the first rollout), the variance of that rollout's own discounted
        ``returns`` stands in, as the statistics will hold it after the rollout: otherwise the critic would first
        learn unscaled returns and then unlearn them, its large gradients starving the actor's under clipping.
        """
        rms = self.return_rms
        if rms is None or self.return_scaling:
            return rewards
        var = returns.var(unbiased=False) if returns is not None and rms.count == 0 else rms.var
        std = torch.sqrt(var.to(rewards.device, torch.float64) + rms.epsilon).to(rewards.dtype)
        return (rewards / std).clamp(-CLIP, CLIP)

    def value_scale(self) -> Tensor:
        """``return_scaling``: the running std of the GAE returns, which the critic's outputs are in units of (the
        critic learns returns divided by it); 1 before any statistics (as Tianshou) and when off. A 0-d float32."""
        if not self.return_scaling:
            return torch.ones(())
        rms = self.return_rms
        return torch.sqrt(rms.var + rms.epsilon).float().cpu()

    def update_normalization(
        self, obs: Tensor, returns: Optional[Tensor], reduce_sum: Optional[Callable[[Tensor], Tensor]] = None
    ) -> None:
        """Merge one rollout's observations ``[B, ...]`` and returns (``normalize_reward``: the discounted returns of
        the raw rewards; ``return_scaling``: the unscaled GAE returns) into the statistics that are on;
        ``reduce_sum`` (an all-reduce over ranks) makes every rank merge the same pooled statistics."""
        if self.encoder.obs_rms is not None:
            self.encoder.obs_rms.update(self.encoder.vector_part(obs), reduce_sum)
        if self.return_rms is not None and returns is not None:
            self.return_rms.update(returns, reduce_sum)
