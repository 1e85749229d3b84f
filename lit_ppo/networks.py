"""The actor-critic: an observation encoder, actor and critic networks, and a distribution head per action space.

Heads compute sampling, log-probabilities and entropy directly on tensors, without ``torch.distributions``
objects: building one per acting step cost more than CartPole itself. A head's ``params`` are the actor's output
(for the Gaussian, with the policy's log-std appended); actions have shape ``(batch, *action_shape)``.
"""

import math
from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_ppo.errors import ConfigError

ENCODERS = ("auto", "cnn", "mlp")
CNN_MIN_SIZE = 36  # the smallest height/width the Nature CNN's three convolutions accept
OBS_CLIP = 10.0  # observation normalization and reward scaling clip to +-10 (as SB3's VecNormalize)
LOG_2PI = math.log(2 * math.pi)


def layer_init(layer: nn.Module, gain: float) -> nn.Module:
    """Orthogonal weights and zero biases, the initialization PPO's reference results depend on."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class MLP(nn.Sequential):
    """Linear layers with tanh between them (an ``nn.Sequential``, so parameters are named ``0.weight``, ...).

    ``forward`` calls the functional ops directly: ``nn.Module.__call__`` costs microseconds per layer, as much
    as a 64-wide layer's arithmetic at PPO's batch sizes, and PPO runs these layers tens of thousands of times.
    """

    def forward(self, x: Tensor) -> Tensor:
        for layer in self:
            x = _tanh(x) if isinstance(layer, nn.Tanh) else F.linear(x, layer.weight, layer.bias)
        return x


def _tanh(x: Tensor) -> Tensor:
    """tanh; on large CPU batches computed as ``2 * sigmoid(2x) - 1``, the same function (to 2e-7).

    torch's CPU tanh runs at scalar speed (~2 ns per element, 35 us for a 256 x 64 activation, with any
    ATEN_CPU_CAPABILITY) while sigmoid is vectorized: forward and backward of a 64-64 tanh MLP at batch 256 take
    ~7% less this way. Small batches (acting) and accelerators keep torch.tanh.
    """
    if x.device.type == "cpu" and x.numel() >= 4096:
        return torch.sigmoid(x * 2.0) * 2.0 - 1.0
    return torch.tanh(x)


def mlp(in_features: int, hidden_sizes: Sequence[int], out_features: int, out_gain: float) -> MLP:
    layers: list[nn.Module] = []
    for size in hidden_sizes:
        layers += [layer_init(nn.Linear(in_features, size), math.sqrt(2)), nn.Tanh()]
        in_features = size
    layers.append(layer_init(nn.Linear(in_features, out_features), out_gain))
    return MLP(*layers)


def nature_cnn(channels: int, height: int, width: int, features: int = 512) -> nn.Sequential:
    """The DQN/PPO Atari trunk (Mnih et al. 2015): three ReLU convolutions and a ReLU linear layer."""
    convs = nn.Sequential(
        layer_init(nn.Conv2d(channels, 32, 8, stride=4), math.sqrt(2)), nn.ReLU(),
        layer_init(nn.Conv2d(32, 64, 4, stride=2), math.sqrt(2)), nn.ReLU(),
        layer_init(nn.Conv2d(64, 64, 3, stride=1), math.sqrt(2)), nn.ReLU(),
        nn.Flatten(),
    )
    with torch.no_grad():
        flat = convs(torch.zeros(1, channels, height, width)).shape[1]
    return nn.Sequential(*convs, layer_init(nn.Linear(flat, features), math.sqrt(2)), nn.ReLU())


# -- distribution heads ---------------------------------------------------------------------------------------
def _categorical_sample(logits: Tensor, generator: Optional[torch.Generator]) -> Tensor:
    # argmax(p / E) with E ~ Exp(1) is an exact categorical sample (the exponential race).
    probs = logits.softmax(-1)
    race = torch.empty_like(probs).exponential_(generator=generator)
    return (probs / race).argmax(-1)


def _categorical_log_prob(logits: Tensor, actions: Tensor) -> Tensor:
    return logits.log_softmax(-1).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def _categorical_entropy(logits: Tensor) -> Tensor:
    log_probs = logits.log_softmax(-1)
    return -(log_probs.exp() * log_probs).sum(-1)


class DistributionHead:
    """What every head offers besides ``sample``/``mode``/``log_prob``/``entropy``."""

    def log_prob_entropy(self, params: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """``log_prob`` and ``entropy`` together, as the PPO loss needs them (heads may share work)."""
        return self.log_prob(params, actions), self.entropy(params)

    def choose(
        self, params: Tensor, generator: Optional[torch.Generator] = None, deterministic: bool = False
    ) -> tuple[Tensor, Tensor]:
        """An action (sampled, or the mode when ``deterministic``) and its log-probability: what acting needs."""
        action = self.mode(params) if deterministic else self.sample(params, generator)
        return action, self.log_prob(params, action)


class CategoricalHead(DistributionHead):
    """A categorical distribution over ``n`` actions (``Discrete``), parameterized by logits."""

    def __init__(self, n: int) -> None:
        self.num_outputs = n
        self.action_shape: tuple[int, ...] = ()
        self.action_dtype = torch.long

    def sample(self, logits: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        return _categorical_sample(logits, generator)

    def mode(self, logits: Tensor) -> Tensor:
        return logits.argmax(-1)

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        return _categorical_log_prob(logits, actions)

    def entropy(self, logits: Tensor) -> Tensor:
        return _categorical_entropy(logits)

    def log_prob_entropy(self, logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        log_probs = logits.log_softmax(-1)  # once for both
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        return log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1), entropy


class MultiCategoricalHead(DistributionHead):
    """Independent categoricals, one per ``MultiDiscrete`` component; the logits of all components concatenated."""

    def __init__(self, nvec: Sequence[int], shape: Sequence[int]) -> None:
        self.nvec = [int(n) for n in nvec]
        self.num_outputs = sum(self.nvec)
        self.action_shape = tuple(shape)
        self.action_dtype = torch.long

    def _per_component(self, fn: Callable, logits: Tensor, *actions: Tensor) -> Tensor:
        parts = logits.split(self.nvec, dim=-1)
        if actions:
            flat = actions[0].reshape(*logits.shape[:-1], len(self.nvec))
            return torch.stack([fn(p, flat[..., i]) for i, p in enumerate(parts)], -1)
        return torch.stack([fn(p) for p in parts], -1)

    def sample(self, logits: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        samples = self._per_component(lambda p: _categorical_sample(p, generator), logits)
        return samples.reshape(*logits.shape[:-1], *self.action_shape)

    def mode(self, logits: Tensor) -> Tensor:
        return self._per_component(lambda p: p.argmax(-1), logits).reshape(*logits.shape[:-1], *self.action_shape)

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        return self._per_component(_categorical_log_prob, logits, actions).sum(-1)

    def entropy(self, logits: Tensor) -> Tensor:
        return self._per_component(_categorical_entropy, logits).sum(-1)


class BernoulliHead(DistributionHead):
    """Independent Bernoullis, one per ``MultiBinary`` element, parameterized by logits; actions are 0./1. floats."""

    def __init__(self, shape: Sequence[int]) -> None:
        self.action_shape = tuple(shape)
        self.num_outputs = math.prod(self.action_shape)
        self.action_dtype = torch.float32

    def sample(self, logits: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        uniform = torch.rand(logits.shape, generator=generator, dtype=logits.dtype, device=logits.device)
        return (uniform < logits.sigmoid()).float().reshape(*logits.shape[:-1], *self.action_shape)

    def mode(self, logits: Tensor) -> Tensor:
        return (logits > 0).float().reshape(*logits.shape[:-1], *self.action_shape)

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        actions = actions.reshape(logits.shape).float()
        return -F.binary_cross_entropy_with_logits(logits, actions, reduction="none").sum(-1)

    def entropy(self, logits: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(logits, logits.sigmoid(), reduction="none").sum(-1)


class DiagGaussianHead(DistributionHead):
    """A diagonal Gaussian over a ``Box``: the mean from the actor, a state-independent log-std (a parameter of
    :class:`ActorCritic`, initialized to 0) appended to it, so ``params = cat([mean, log_std], -1)``.

    Clip, not squash: samples are unbounded; :func:`lit_ppo.envs.actions_to_env` clips them to the Box when they
    are sent to the environment, while the rollout stores the sampled action and its log-prob (CleanRL, SB3).
    Squashing with tanh would keep samples in bounds but needs a log-det correction and a rescaling to the
    bounds; clipping keeps the Gaussian's log-prob and entropy exact and is PPO's reference choice.
    """

    def __init__(self, shape: Sequence[int]) -> None:
        self.action_shape = tuple(shape)
        self.num_outputs = math.prod(self.action_shape)  # means; ActorCritic appends as many log-stds
        self.action_dtype = torch.float32

    def sample(self, params: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        mean, log_std = params.chunk(2, dim=-1)
        noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
        return (mean + log_std.exp() * noise).reshape(*mean.shape[:-1], *self.action_shape)

    def mode(self, params: Tensor) -> Tensor:
        mean = params.chunk(2, dim=-1)[0]
        return mean.reshape(*mean.shape[:-1], *self.action_shape)

    def log_prob(self, params: Tensor, actions: Tensor) -> Tensor:
        mean, log_std = params.chunk(2, dim=-1)
        z = (actions.reshape(mean.shape).float() - mean) * (-log_std).exp()
        return (-0.5 * z.square() - log_std - 0.5 * LOG_2PI).sum(-1)

    def entropy(self, params: Tensor) -> Tensor:
        log_std = params.chunk(2, dim=-1)[1]
        return (log_std + 0.5 * (1.0 + LOG_2PI)).sum(-1)


Head = Union[CategoricalHead, MultiCategoricalHead, BernoulliHead, DiagGaussianHead]


def make_head(action_spec: dict[str, Any]) -> Head:
    """The distribution head for an action-space description made by :func:`lit_ppo.envs.describe_spaces`."""
    kind = action_spec["type"]
    if kind == "discrete":
        return CategoricalHead(int(action_spec["n"]))
    if kind == "box":
        return DiagGaussianHead(action_spec["shape"])
    if kind == "multi_discrete":
        return MultiCategoricalHead(action_spec["nvec"], action_spec["shape"])
    if kind == "multi_binary":
        return BernoulliHead(action_spec["shape"])
    raise ValueError(f"no distribution head for action space type {kind!r}")


# -- observations ---------------------------------------------------------------------------------------------
class RunningMeanStd(nn.Module):
    """Running mean and (population) variance of a stream of batches, merged with Chan et al.'s parallel formula.

    Buffers, so they are in ``state_dict`` and checkpoints, follow the policy to its device, and reach the CPU
    acting copy through ``load_state_dict``. Before the first update (count 0) it is the identity (mean 0, var 1).
    """

    def __init__(self, shape: Sequence[int] = (), epsilon: float = 1e-8) -> None:
        super().__init__()
        self.epsilon = epsilon
        self.register_buffer("mean", torch.zeros(tuple(shape)))
        self.register_buffer("var", torch.ones(tuple(shape)))
        self.register_buffer("count", torch.zeros(()))

    @torch.no_grad()
    def update(self, x: Tensor, reduce_sum: Optional[Callable[[Tensor], Tensor]] = None) -> None:
        """Merge the batch ``x`` (``[..., *shape]``); ``reduce_sum`` (an all-reduce) first pools every rank's batch."""
        x = x.reshape(-1, *self.mean.shape).double()  # float64 sums where x lives (the CPU rollout)
        count = torch.tensor(float(x.shape[0]), dtype=torch.float64)
        mean = x.mean(0)
        m2 = (x - mean).square().sum(0)
        count, mean, m2 = (t.to(self.mean.device, torch.float32) for t in (count, mean, m2))
        if reduce_sum is not None:
            total = reduce_sum(count.clone())
            pooled_mean = reduce_sum(count * mean) / total
            m2 = reduce_sum(m2 + count * (mean - pooled_mean).square())
            count, mean = total, pooled_mean
        total = self.count + count
        delta = mean - self.mean
        m2_total = self.var * self.count + m2 + delta.square() * self.count * count / total
        self.mean.add_(delta * count / total)
        self.var.copy_(m2_total / total)
        self.count.copy_(total)

    def normalize(self, x: Tensor) -> Tensor:
        return ((x - self.mean) / torch.sqrt(self.var + self.epsilon)).clamp(-OBS_CLIP, OBS_CLIP)


def spec_leaves(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-composite parts of an observation description, depth first in key order (the packing order)."""
    if spec["type"] in ("dict", "tuple"):
        return [leaf for part in spec["spaces"] for leaf in spec_leaves(part)]
    return [spec]


def leaf_size(spec: dict[str, Any]) -> int:
    """Values one observation of a non-composite space takes in a packed Dict/Tuple vector."""
    if spec["type"] == "discrete":
        return 1
    if spec["type"] == "multi_discrete":
        return len(spec["nvec"])
    return math.prod(spec["shape"])


def leaf_shape(leaf: dict[str, Any]) -> tuple[int, ...]:
    """Shape of one observation of a non-composite space as a tensor."""
    if leaf["type"] == "discrete":
        return ()
    if leaf["type"] == "multi_discrete":
        return (len(leaf["nvec"]),)
    return tuple(leaf["shape"])


def _image_geometry(spec: dict[str, Any]) -> tuple[int, int, int]:
    shape = spec["shape"]
    if len(shape) == 2:
        return 1, shape[0], shape[1]
    return (shape[2], shape[0], shape[1]) if spec.get("channels_last") else tuple(shape)


class ObservationEncoder(nn.Module):
    """One feature vector from an observation batch as :func:`lit_ppo.envs.observations_to_tensor` makes it.

    Each part of the observation (the space itself, or each Dict/Tuple entry, unpacked from the packed vector):

    - vector ``Box``: flattened, float; with ``normalize``, all vector parts together are normalized by running
      statistics (clip +-10);
    - image (uint8 ``Box`` with 2 or 3 axes): scaled to [0, 1] here, on whatever device the network is; then a
      Nature CNN when ``encoder`` is ``auto`` and the image is at least 36 x 36 (or ``encoder`` is ``cnn``: every
      2- or 3-axis ``Box``), else flattened (``mlp``);
    - ``Discrete`` / ``MultiDiscrete``: one-hot; ``MultiBinary``: as 0./1. floats.

    The parts' features are concatenated: a Dict or Tuple (nested too) gets one encoder per entry.
    """

    def __init__(self, spec: dict[str, Any], encoder: str = "auto", normalize: bool = False) -> None:
        super().__init__()
        if encoder not in ENCODERS:
            raise ConfigError(f"model.encoder: {encoder!r} is not one of {ENCODERS}.")
        self.packed = spec["type"] in ("dict", "tuple")
        self.leaves = spec_leaves(spec)
        sizes = [leaf_size(leaf) for leaf in self.leaves]
        self.slices = [(sum(sizes[:i]), sum(sizes[: i + 1])) for i in range(len(sizes))]
        self.vector_idx: list[int] = []  # normalized together
        self.pixel_idx: list[int] = []  # images flattened into the MLP
        self.cnn_idx: list[int] = []
        self.onehot_idx: list[int] = []
        self.binary_idx: list[int] = []
        self.cnns = nn.ModuleList()
        vector_dim = other_dim = 0
        for i, leaf in enumerate(self.leaves):
            if leaf["type"] == "box" and self._uses_cnn(leaf, encoder):
                self.cnn_idx.append(i)
                self.cnns.append(nature_cnn(*_image_geometry(leaf)))
                other_dim += 512
            elif leaf["type"] == "box" and leaf.get("image"):
                self.pixel_idx.append(i)
                other_dim += sizes[i]
            elif leaf["type"] == "box":
                self.vector_idx.append(i)
                vector_dim += sizes[i]
            elif leaf["type"] in ("discrete", "multi_discrete"):
                self.onehot_idx.append(i)
                other_dim += leaf["n"] if leaf["type"] == "discrete" else sum(leaf["nvec"])
            else:
                self.binary_idx.append(i)
                other_dim += sizes[i]
        if encoder == "cnn" and not self.cnn_idx:
            raise ConfigError(
                f"model.encoder: 'cnn' needs an image observation, a Box with 2 or 3 axes of at least "
                f"{CNN_MIN_SIZE}x{CNN_MIN_SIZE}; use 'mlp' or resize (gymnasium.wrappers.ResizeObservation)."
            )
        self.num_features = vector_dim + other_dim
        self.obs_rms = RunningMeanStd((vector_dim,)) if normalize and vector_dim else None
        # A lone image: the CNN is the trunk actor and critic share (ActorCritic gives it linear heads).
        self.image_only = not self.packed and bool(self.cnn_idx)

    @staticmethod
    def _uses_cnn(leaf: dict[str, Any], encoder: str) -> bool:
        if encoder == "mlp" or len(leaf["shape"]) not in (2, 3) or (encoder == "auto" and not leaf.get("image")):
            return False
        _, height, width = _image_geometry(leaf)
        return min(height, width) >= CNN_MIN_SIZE

    def _parts(self, obs: Tensor) -> list[Tensor]:
        if not self.packed:
            return [obs]
        batch = obs.shape[:1]
        return [obs[:, a:b].reshape(*batch, *leaf_shape(leaf)) for leaf, (a, b) in zip(self.leaves, self.slices)]

    def _vector(self, parts: list[Tensor]) -> Optional[Tensor]:
        if not self.vector_idx:
            return None
        if len(self.vector_idx) == 1:  # the common case, a flat Box: no copy
            return parts[self.vector_idx[0]].flatten(1).float()
        return torch.cat([parts[i].flatten(1).float() for i in self.vector_idx], 1)

    def vector_part(self, obs: Tensor) -> Optional[Tensor]:
        """The un-normalized vector features of ``obs``: what the observation statistics are computed from."""
        return self._vector(self._parts(obs))

    def _image(self, x: Tensor, leaf: dict[str, Any]) -> Tensor:
        x = x.float() / 255.0 if leaf.get("image") else x.float()
        if len(leaf["shape"]) == 2:
            return x.unsqueeze(1)
        return x.permute(0, 3, 1, 2) if leaf.get("channels_last") else x

    def forward(self, obs: Tensor) -> Tensor:
        parts = self._parts(obs)
        features = []
        vector = self._vector(parts)
        if vector is not None:
            features.append(self.obs_rms.normalize(vector) if self.obs_rms is not None else vector)
        for i in self.pixel_idx:
            features.append(parts[i].flatten(1).float() / 255.0)
        for i, cnn in zip(self.cnn_idx, self.cnns):
            features.append(cnn(self._image(parts[i], self.leaves[i])))
        for i in self.onehot_idx:
            leaf = self.leaves[i]
            sizes = [leaf["n"]] if leaf["type"] == "discrete" else leaf["nvec"]
            index = parts[i].long().reshape(parts[i].shape[0], -1)
            features += [F.one_hot(index[:, j], n).float() for j, n in enumerate(sizes)]
        for i in self.binary_idx:
            features.append(parts[i].flatten(1).float())
        return features[0] if len(features) == 1 else torch.cat(features, 1)


# -- the policy -----------------------------------------------------------------------------------------------
class ActorCritic(nn.Module):
    """An observation encoder, then separate actor and critic MLPs (tanh), orthogonally initialized: gain sqrt(2)
    hidden, 0.01 policy, 1 value. A lone image observation instead gets a Nature-CNN trunk shared by actor and
    critic, with linear heads (``hidden_sizes`` is not used then).

    Everything the policy needs at evaluation is in its ``state_dict``: weights, the Gaussian's log-std, and the
    observation / return statistics when ``normalize_obs`` / ``normalize_reward`` are on.

    Args:
        observation: an observation-space description (:func:`lit_ppo.envs.describe_spaces`), or a shape for a
            flat ``Box``.
        action_spec: an action-space description.
        hidden_sizes: hidden layers of the actor and of the critic MLP.
        encoder: ``auto`` (a CNN for uint8 images of at least 36 x 36), ``cnn`` or ``mlp`` (see
            :class:`ObservationEncoder`).
        normalize_obs: normalize vector observations by running statistics (clip +-10).
        normalize_reward: keep running statistics of the discounted return, by which rollouts scale rewards.
    """

    def __init__(
        self,
        observation: Union[Sequence[int], dict[str, Any]],
        action_spec: dict[str, Any],
        hidden_sizes: Sequence[int],
        encoder: str = "auto",
        normalize_obs: bool = False,
        normalize_reward: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(observation, dict):
            observation = {"type": "box", "shape": list(observation), "dtype": "float32", "image": False}
        self.head = make_head(action_spec)
        self.encoder = ObservationEncoder(observation, encoder, normalize_obs)
        if self.encoder.image_only:
            hidden_sizes = []  # the CNN is the trunk (CleanRL / baselines Atari PPO)
        n = self.encoder.num_features
        self.actor = mlp(n, hidden_sizes, self.head.num_outputs, out_gain=0.01)
        self.critic = mlp(n, hidden_sizes, 1, out_gain=1.0)
        # The Gaussian's state-independent log-std: optimized and saved with the policy; std 1 at the start.
        gaussian = isinstance(self.head, DiagGaussianHead)
        self.log_std = nn.Parameter(torch.zeros(self.head.num_outputs)) if gaussian else None
        self.return_rms = RunningMeanStd(()) if normalize_reward else None

    @classmethod
    def from_env_spec(
        cls, env_spec: dict[str, Any], hidden_sizes: Sequence[int], encoder: str = "auto"
    ) -> "ActorCritic":
        """The policy for ``PPODataModule.env_spec`` (older specs without ``observation`` mean a flat Box)."""
        return cls(
            env_spec.get("observation", env_spec["observation_shape"]),
            env_spec["action"],
            hidden_sizes,
            encoder=encoder,
            normalize_obs=bool(env_spec.get("normalize_obs", False)),
            normalize_reward=bool(env_spec.get("normalize_reward", False)),
        )

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Distribution parameters and values, both cast to fp32 (autocast may have made them half precision)."""
        features = self.encoder(obs)
        params = self.actor(features).float()
        if self.log_std is not None:
            params = torch.cat([params, self.log_std.float().expand_as(params)], -1)
        return params, self.critic(features).squeeze(-1).float()

    def value(self, obs: Tensor) -> Tensor:
        return self.critic(self.encoder(obs)).squeeze(-1).float()

    def act(
        self, obs: Tensor, generator: Optional[torch.Generator] = None, deterministic: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Action, its log-probability and the state value for a batch of observations; deterministic: the mode
        (the Gaussian's mean)."""
        params, value = self(obs)
        return (*self.head.choose(params, generator, deterministic), value)

    def evaluate(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Log-probability of ``actions``, entropy and value under the current parameters (fp32)."""
        params, value = self(obs)
        return (*self.head.log_prob_entropy(params, actions), value)

    # -- normalization statistics -------------------------------------------------------------------------------
    def scale_rewards(self, rewards: Tensor, returns: Optional[Tensor] = None) -> Tensor:
        """Rewards divided by the running std of the discounted return, clipped to +-10 (identity when off).

        Before any statistics exist (the first rollout), the variance of that rollout's own discounted
        ``returns`` stands in, as the statistics will hold it after the rollout: otherwise the critic would first
        learn unscaled returns and then unlearn them, its large gradients starving the actor's under clipping.
        """
        rms = self.return_rms
        if rms is None:
            return rewards
        var = returns.var(unbiased=False) if returns is not None and rms.count == 0 else rms.var
        return (rewards / torch.sqrt(var + rms.epsilon)).clamp(-OBS_CLIP, OBS_CLIP)

    def update_normalization(
        self, obs: Tensor, returns: Tensor, reduce_sum: Optional[Callable[[Tensor], Tensor]] = None
    ) -> None:
        """Merge one rollout's observations ``[B, ...]`` and discounted returns into the statistics that are on;
        ``reduce_sum`` (an all-reduce over ranks) makes every rank merge the same pooled statistics."""
        if self.encoder.obs_rms is not None:
            self.encoder.obs_rms.update(self.encoder.vector_part(obs), reduce_sum)
        if self.return_rms is not None:
            self.return_rms.update(returns, reduce_sum)
