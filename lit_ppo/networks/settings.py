"""The network's settings (``model.hidden_sizes``, ``encoder``, ``activation``, ``network``, ``recurrent``,
``log_std_init``, ``ortho_init``), checked once, here, when they are read: the network classes take them as given.
A mistake names its ``model.`` key, the value and what would do."""

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Optional

from lit_ppo.classpath import ClassPathConfig
from lit_ppo.errors import ConfigError, require
from lit_ppo.networks.encoders import ENCODERS
from lit_ppo.networks.recurrent import RecurrentConfig

ACTIVATIONS = ("tanh", "relu")
# The Gaussian's first log-std: std 0.61 (Spinning Up's start; 0 until 2026-12-07, as SB3's). A first std of 1 makes
# the control cost of Ant-v5's and Humanoid-v5's random actions outweigh staying alive (docs/zoo.md).
LOG_STD_INIT = -0.5


@dataclass(frozen=True)
class NetworkSettings:
    """What builds the actor-critic (:class:`lit_ppo.networks.actor_critic.ActorCritic`; the arguments are
    ``PPOModule``'s of the same names). Make it with :meth:`parse`, which checks and normalizes the values."""

    hidden_sizes: tuple[int, ...] = (64, 64)
    encoder: str = "auto"
    activation: str = "tanh"
    network: Optional[ClassPathConfig] = None
    recurrent: Optional[RecurrentConfig] = None
    log_std_init: float = LOG_STD_INIT
    ortho_init: bool = True

    @classmethod
    def parse(cls, **values: Any) -> "NetworkSettings":
        """The settings from config values (``recurrent`` as ``model.recurrent`` takes it); a bad one is named."""
        if "hidden_sizes" in values:
            sizes = list(values["hidden_sizes"])
            require(len(sizes) > 0 and all(isinstance(h, int) and h > 0 for h in sizes), "model.hidden_sizes",
                    f"must be positive layer widths, got {sizes}.")
            values["hidden_sizes"] = tuple(sizes)
        if "recurrent" in values and not isinstance(values["recurrent"], RecurrentConfig):
            values["recurrent"] = RecurrentConfig.parse(values["recurrent"])
        settings = cls(**values)
        require(settings.activation in ACTIVATIONS, "model.activation",
                f"{settings.activation!r} is not one of {ACTIVATIONS}.")
        require(settings.encoder in ENCODERS, "model.encoder", f"{settings.encoder!r} is not one of {ENCODERS}.")
        log_std = settings.log_std_init
        if not (isinstance(log_std, (int, float)) and not isinstance(log_std, bool) and math.isfinite(log_std)):
            raise ConfigError(f"model.log_std_init: must be a finite number (the initial log-std, e.g. 0 for std 1 "
                              f"or -2 for std 0.14), got {log_std!r}.")
        require(isinstance(settings.ortho_init, bool), "model.ortho_init",
                f"must be true (orthogonal init) or false (PyTorch's default init), got {settings.ortho_init!r}.")
        return settings

    @classmethod
    def from_hparams(cls, hparams: Mapping[str, Any]) -> "NetworkSettings":
        """The network settings among ``PPOModule``'s hyper-parameters (a checkpoint's ``hyper_parameters``)."""
        return cls.parse(**{f.name: hparams[f.name] for f in fields(cls) if f.name in hparams})


POLICY_SETTINGS = tuple(f.name for f in fields(NetworkSettings))  # PPOModule's arguments that build the policy
