"""Gymnasium spaces as small typed specs, made once; and the conversions between what vector envs speak (numpy)
and what the policy takes (tensors).

A spec says what the networks and the rollout buffers need of a space: shapes, dtypes, category counts, whether a
``Box`` is an image. Specs are frozen dataclasses and turn into plain data (:func:`spec_to_dict`) for checkpoint
hyperparameters, which torch loads with ``weights_only``. This module imports nothing from the rest of lit_ppo.
"""

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence, Union

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array
from torch import Tensor

SUPPORTED = (
    "observations: Box (vectors; uint8 images H x W x C or C x H x W), Discrete, MultiDiscrete, MultiBinary, "
    "and Dict/Tuple of these (nested too); actions: Discrete, Box, MultiDiscrete, MultiBinary"
)


class UnsupportedSpaceError(ValueError):
    """A space the policy cannot take; the message names it and what is supported."""


@dataclass(frozen=True)
class BoxSpec:
    """A ``Box``: float vectors or (uint8 in [0, 255], 2 or 3 axes) an image, which the network scales to [0, 1]."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    image: bool = False
    channels_last: bool = False  # images only: (H, W, C) rather than (C, H, W)

    @property
    def width(self) -> int:  # values one element takes in a packed Dict/Tuple vector
        return math.prod(self.shape)

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        return self.shape

    @property
    def tensor_dtype(self) -> torch.dtype:
        return torch.uint8 if self.dtype == "uint8" else torch.float32

    @property
    def geometry(self) -> tuple[int, int, int]:
        """(channels, height, width) of an image-like box."""
        if len(self.shape) == 2:
            return 1, self.shape[0], self.shape[1]
        c, h, w = self.shape if not self.channels_last else (self.shape[2], self.shape[0], self.shape[1])
        return c, h, w


@dataclass(frozen=True)
class DiscreteSpec:
    """``Discrete(n)``: observations one-hot encoded, actions as a categorical; indices counted from 0."""

    n: int

    width = 1
    shape = ()  # of one action

    @property
    def categories(self) -> tuple[int, ...]:
        return (self.n,)

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        return ()

    tensor_dtype = torch.long


@dataclass(frozen=True)
class MultiDiscreteSpec:
    """``MultiDiscrete(nvec)``: independent categories per component, ``nvec`` flattened."""

    nvec: tuple[int, ...]
    shape: tuple[int, ...]

    @property
    def width(self) -> int:
        return len(self.nvec)

    @property
    def categories(self) -> tuple[int, ...]:
        return self.nvec

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        return self.shape

    tensor_dtype = torch.long


@dataclass(frozen=True)
class MultiBinarySpec:
    """``MultiBinary(shape)``: 0/1 values; observations as uint8, actions as 0./1. floats."""

    shape: tuple[int, ...]

    @property
    def width(self) -> int:
        return math.prod(self.shape)

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        return self.shape

    tensor_dtype = torch.uint8


LeafSpec = Union[BoxSpec, DiscreteSpec, MultiDiscreteSpec, MultiBinarySpec]


@dataclass(frozen=True)
class CompositeSpec:
    """A ``Dict`` (``keys`` in the space's order) or ``Tuple`` (no keys): its parts are packed into one vector
    per environment, leaf after leaf, depth first."""

    parts: tuple[Union[LeafSpec, "CompositeSpec"], ...]
    keys: tuple[str, ...] = ()

    @property
    def leaves(self) -> list[LeafSpec]:
        return [leaf for part in self.parts for leaf in (part.leaves if isinstance(part, CompositeSpec) else [part])]

    @property
    def width(self) -> int:
        return sum(leaf.width for leaf in self.leaves)

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        return (self.width,)

    @property
    def tensor_dtype(self) -> torch.dtype:
        uint8 = all(leaf.tensor_dtype == torch.uint8 for leaf in self.leaves)
        return torch.uint8 if uint8 else torch.float32


ObservationSpec = Union[LeafSpec, CompositeSpec]
ActionSpec = Union[DiscreteSpec, BoxSpec, MultiDiscreteSpec, MultiBinarySpec]


def action_tensor_layout(spec: ActionSpec) -> tuple[tuple[int, ...], torch.dtype]:
    """Shape and dtype of one action as the policy produces it (what a rollout buffer stores)."""
    if isinstance(spec, (DiscreteSpec, MultiDiscreteSpec)):
        return spec.tensor_shape, torch.long
    return spec.shape, torch.float32  # Box; MultiBinary actions are 0./1. floats (the Bernoulli's samples)


# -- from gymnasium spaces ----------------------------------------------------------------------------------------
def _unsupported(where: str, space: spaces.Space, hint: str = "") -> UnsupportedSpaceError:
    return UnsupportedSpaceError(f"{where} {space}, which is not supported (supported: {SUPPORTED}).{hint}")


def _empty(where: str, space: spaces.Space) -> UnsupportedSpaceError:
    return UnsupportedSpaceError(
        f"{where} {space}, which has no values (shape {space.shape}: an axis of size 0), so the policy could neither "
        "see nor choose anything through it. Give it a size, or remove it with a wrapper (data.wrappers).")


def observation_spec(space: spaces.Space, where: str = "observation space") -> ObservationSpec:
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)) and math.prod(space.shape) == 0:
        raise _empty(where, space)  # a zero-width part: an image CNN over 0 channels, or a policy blind to it
    if isinstance(space, spaces.Box):
        shape = tuple(int(s) for s in space.shape)
        # uint8 in [0, 255] with 2 or 3 axes is an image (as SB3 decides); other uint8 boxes are plain vectors.
        image = bool(space.dtype == np.uint8 and len(shape) in (2, 3) and np.all(space.low == 0)
                     and np.all(space.high == 255))
        # The channel axis is the short one: (84, 84, 4) and (210, 160, 3) are channels-last, (4, 84, 84) not.
        channels_last = len(shape) == 3 and shape[2] < shape[0]
        return BoxSpec(shape, str(space.dtype), image, channels_last)
    if isinstance(space, spaces.Discrete):
        return DiscreteSpec(int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        return MultiDiscreteSpec(tuple(int(n) for n in space.nvec.flatten()), tuple(int(s) for s in space.shape))
    if isinstance(space, spaces.MultiBinary):
        return MultiBinarySpec(tuple(int(s) for s in np.atleast_1d(space.shape)))
    if isinstance(space, spaces.Dict):
        keys = tuple(str(k) for k in space.spaces)
        return CompositeSpec(tuple(observation_spec(space[k], f"{where} {space}, whose key {k!r} is") for k in keys), keys)
    if isinstance(space, spaces.Tuple):
        return CompositeSpec(tuple(observation_spec(s, f"{where} {space}, whose item {i} is")
                                   for i, s in enumerate(space)))
    raise _unsupported(where, space, " Wrap the environment (data.wrappers) so that it returns a supported space.")


def action_spec(space: spaces.Space, where: str = "action space") -> ActionSpec:
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)) and math.prod(space.shape) == 0:
        raise _empty(where, space)
    if isinstance(space, spaces.Discrete):
        return DiscreteSpec(int(space.n))
    if isinstance(space, spaces.Box):
        if not np.issubdtype(space.dtype, np.floating):
            raise _unsupported(where, space, " Box actions must be floating point.")
        return BoxSpec(tuple(int(s) for s in space.shape), str(space.dtype))  # bounds stay with the env's space
    if isinstance(space, spaces.MultiDiscrete):
        return MultiDiscreteSpec(tuple(int(n) for n in space.nvec.flatten()), tuple(int(s) for s in space.shape))
    if isinstance(space, spaces.MultiBinary):
        return MultiBinarySpec(tuple(int(s) for s in np.atleast_1d(space.shape)))
    raise _unsupported(where, space)


# -- as plain data (checkpoint hyperparameters) -------------------------------------------------------------------
_KINDS = {"box": BoxSpec, "discrete": DiscreteSpec, "multi_discrete": MultiDiscreteSpec,
          "multi_binary": MultiBinarySpec, "composite": CompositeSpec}


def spec_to_dict(spec: Union[ObservationSpec, ActionSpec]) -> dict[str, Any]:
    """Lists, ints, strings and bools only, tagged with ``type``."""
    kind = next(name for name, cls in _KINDS.items() if isinstance(spec, cls))
    out: dict[str, Any] = {"type": kind}
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        if f.name == "parts":
            value = [spec_to_dict(part) for part in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def spec_from_dict(data: dict[str, Any]) -> Union[ObservationSpec, ActionSpec]:
    if not isinstance(data, dict) or data.get("type") not in _KINDS:
        raise ValueError(f"not a lit_ppo space spec: {data!r}")
    values = {k: v for k, v in data.items() if k != "type"}
    if data["type"] == "composite":
        values["parts"] = tuple(spec_from_dict(part) for part in values["parts"])
    return _KINDS[data["type"]](**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


# -- converting observations and actions --------------------------------------------------------------------------
def observations_to_tensor(obs: Any, space: spaces.Space) -> Tensor:
    """A vector env's batch of observations as the one tensor the policy (and the rollout buffer) takes.

    Box: float32, except uint8 images, which stay uint8 (a quarter of the memory; the network scales them to
    [0, 1] on the learner's device). Discrete / MultiDiscrete: int64 indices from 0 (the network one-hot encodes
    them). MultiBinary: uint8. Dict / Tuple: every part flattened and packed, in key order, into one vector per
    environment: uint8 if all parts are uint8, float32 otherwise (the network unpacks it by the spec).
    """
    if isinstance(space, spaces.Box):
        return torch.as_tensor(obs, dtype=torch.uint8 if space.dtype == np.uint8 else torch.float32)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return torch.as_tensor(np.asarray(obs, dtype=np.int64) - space.start)
    if isinstance(space, spaces.MultiBinary):
        return torch.as_tensor(obs, dtype=torch.uint8)
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        keys = list(space.spaces) if isinstance(space, spaces.Dict) else range(len(space.spaces))
        parts = [observations_to_tensor(obs[key], space[key]) for key in keys]
        dtype = torch.uint8 if all(p.dtype == torch.uint8 for p in parts) else torch.float32
        return torch.cat([p.reshape(p.shape[0], -1).to(dtype) for p in parts], dim=1)
    raise TypeError(f"no tensor conversion for observation space {space}")


def batch_observations(items: Sequence[Any], space: spaces.Space) -> Tensor:
    """Single-env observations (e.g. ``info["final_obs"][idx]``, or one env's ``obs``) as one policy batch."""
    return observations_to_tensor(concatenate(space, list(items), create_empty_array(space, len(items))), space)


def actions_to_env(actions: Tensor, space: spaces.Space) -> np.ndarray:
    """Policy actions as the vector env takes them.

    Box actions are *clipped* to the bounds here, while the rollout keeps the sampled action and its log-prob
    (see :class:`lit_ppo.networks.distributions.DiagGaussianHead`). Discrete/MultiDiscrete indices are shifted by ``start``.
    """
    array = actions.numpy()
    if isinstance(space, spaces.Discrete):
        return array + space.start if space.start else array
    if isinstance(space, spaces.Box):
        return np.clip(array, space.low, space.high).astype(space.dtype, copy=False)
    if isinstance(space, spaces.MultiDiscrete):
        return array + space.start
    if isinstance(space, spaces.MultiBinary):
        return array.astype(space.dtype)
    raise TypeError(f"no action conversion for action space {space}")
