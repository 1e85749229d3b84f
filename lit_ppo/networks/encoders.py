"""Observation encoders: from an observation batch, as :func:`lit_ppo.envs.spaces.observations_to_tensor` makes it,
to one float feature vector per environment.

- :class:`ObservationEncoder`, the built-in one: every part of the observation (the space itself, or each
  Dict/Tuple entry) encoded by its kind, normalization statistics for the vector parts, a Nature CNN for images.
- :class:`NormalizedObservation`, in front of a user's own network: the observation as the rollout stores it,
  a flat vector ``Box`` normalized when ``normalize_obs`` is on.
"""

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_ppo.errors import ConfigError
from lit_ppo.networks.normalization import RunningMeanStd
from lit_ppo.envs.spaces import BoxSpec, CompositeSpec, DiscreteSpec, MultiDiscreteSpec, ObservationSpec

ENCODERS = ("auto", "cnn", "mlp")
CNN_MIN_SIZE = 36  # the smallest height/width the Nature CNN's three convolutions accept
CNN_FEATURES = 512


def layer_init(layer: nn.Module, gain: float) -> nn.Module:
    """Orthogonal weights and zero biases, the initialization PPO's reference results depend on."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def nature_cnn(channels: int, height: int, width: int, features: int = CNN_FEATURES) -> nn.Sequential:
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


def rows(x: Tensor) -> Tensor:
    """``x`` as one flat row per sample, ``[batch, n]``: a 0-d part (``Box(shape=())``) is ``[batch]`` and gets an axis.
    Not ``reshape(batch, -1)``, which an empty batch cannot take."""
    return x.flatten(1) if x.dim() > 1 else x.unsqueeze(1)


def _uses_cnn(leaf: ObservationSpec, encoder: str) -> bool:
    if not isinstance(leaf, BoxSpec) or encoder == "mlp" or len(leaf.shape) not in (2, 3):
        return False
    if encoder == "auto" and not leaf.image:
        return False
    _, height, width = leaf.geometry
    return min(height, width) >= CNN_MIN_SIZE


class ObservationEncoder(nn.Module):
    """One feature vector per observation. Each part of the observation, by its spec:

    - vector ``Box``: flattened, float; with ``normalize``, all vector parts together are normalized by running
      statistics (clip +-10);
    - image (uint8 ``Box`` with 2 or 3 axes): scaled to [0, 1] here, on whatever device the network is; then a
      Nature CNN when ``encoder`` is ``auto`` and the image is at least 36 x 36 (or ``encoder`` is ``cnn``: every
      2- or 3-axis ``Box``), else flattened (``mlp``);
    - ``Discrete`` / ``MultiDiscrete``: one-hot; ``MultiBinary``: as 0./1. floats.

    The parts' features are concatenated. A lone image encoded by a CNN is a trunk that actor and critic share
    (``image_only``).
    """

    def __init__(self, spec: ObservationSpec, encoder: str = "auto", normalize: bool = False) -> None:
        super().__init__()
        self.packed = isinstance(spec, CompositeSpec)
        self.leaves = spec.leaves if self.packed else [spec]
        offsets = [0]
        for leaf in self.leaves:
            offsets.append(offsets[-1] + leaf.width)
        self.slices = list(zip(offsets[:-1], offsets[1:]))
        # Indices into self.leaves by how each is encoded.
        self.vector_idx, self.pixel_idx, self.cnn_idx, self.onehot_idx, self.binary_idx = [], [], [], [], []
        self.cnns = nn.ModuleList()
        vector_dim = other_dim = 0
        for i, leaf in enumerate(self.leaves):
            if _uses_cnn(leaf, encoder):
                self.cnn_idx.append(i)
                self.cnns.append(nature_cnn(*leaf.geometry))
                other_dim += CNN_FEATURES
            elif isinstance(leaf, BoxSpec) and leaf.image:
                self.pixel_idx.append(i)
                other_dim += leaf.width
            elif isinstance(leaf, BoxSpec):
                self.vector_idx.append(i)
                vector_dim += leaf.width
            elif isinstance(leaf, (DiscreteSpec, MultiDiscreteSpec)):
                self.onehot_idx.append(i)
                other_dim += sum(leaf.categories)
            else:
                self.binary_idx.append(i)
                other_dim += leaf.width
        if encoder == "cnn" and not self.cnn_idx:
            raise ConfigError(
                f"model.encoder: 'cnn' needs an image observation, a Box with 2 or 3 axes of at least "
                f"{CNN_MIN_SIZE}x{CNN_MIN_SIZE}; use 'mlp' or resize (gymnasium.wrappers.ResizeObservation)."
            )
        self.num_features = vector_dim + other_dim
        self.obs_rms = RunningMeanStd((vector_dim,)) if normalize and vector_dim else None
        self.image_only = not self.packed and bool(self.cnn_idx)

    def _parts(self, obs: Tensor) -> list[Tensor]:
        if not self.packed:
            return [obs]
        batch = obs.shape[:1]
        return [obs[:, a:b].reshape(*batch, *leaf.tensor_shape) for leaf, (a, b) in zip(self.leaves, self.slices)]

    def _vector(self, parts: list[Tensor]) -> Optional[Tensor]:
        if not self.vector_idx:
            return None
        if len(self.vector_idx) == 1:  # the common case, a flat Box: no copy
            return rows(parts[self.vector_idx[0]]).float()
        return torch.cat([rows(parts[i]).float() for i in self.vector_idx], 1)

    def vector_part(self, obs: Tensor) -> Optional[Tensor]:
        """The un-normalized vector features of ``obs``: what the observation statistics are computed from."""
        return self._vector(self._parts(obs))

    def _image(self, x: Tensor, leaf: BoxSpec) -> Tensor:
        x = x.float() / 255.0 if leaf.image else x.float()
        if len(leaf.shape) == 2:
            return x.unsqueeze(1)
        return x.permute(0, 3, 1, 2) if leaf.channels_last else x

    def forward(self, obs: Tensor) -> Tensor:
        parts = self._parts(obs)
        features = []
        vector = self._vector(parts)
        if vector is not None:
            features.append(self.obs_rms.normalize(vector) if self.obs_rms is not None else vector)
        for i in self.pixel_idx:
            features.append(rows(parts[i]).float() / 255.0)
        for i, cnn in zip(self.cnn_idx, self.cnns):
            features.append(cnn(self._image(parts[i], self.leaves[i])))
        for i in self.onehot_idx:
            index = rows(parts[i].long())
            features += [F.one_hot(index[:, j], n).float() for j, n in enumerate(self.leaves[i].categories)]
        for i in self.binary_idx:
            features.append(rows(parts[i]).float())
        return features[0] if len(features) == 1 else torch.cat(features, 1)


class NormalizedObservation(nn.Module):
    """The observation as the rollout stores it (what a user's network receives); a flat vector ``Box`` is
    normalized by running statistics when ``normalize`` is on. Any other observation (images, discrete, dicts)
    passes through unchanged, as the built-in encoder leaves its non-vector parts: ``data.normalize_obs`` is on by
    default, and a user's image network must not fail for it."""

    def __init__(self, spec: ObservationSpec, normalize: bool = False) -> None:
        super().__init__()
        vector = isinstance(spec, BoxSpec) and not spec.image
        self.obs_rms = RunningMeanStd((spec.width,)) if normalize and vector else None

    def vector_part(self, obs: Tensor) -> Optional[Tensor]:
        return rows(obs).float() if self.obs_rms is not None else None

    def forward(self, obs: Tensor) -> Tensor:
        if self.obs_rms is None:
            return obs
        return self.obs_rms.normalize(rows(obs).float()).reshape(obs.shape)
