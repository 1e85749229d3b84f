"""The update's settings (``model.lr``, ``clip_coef``, ``vf_coef``, ...), checked once, here: ``PPOModule`` keeps its
flat signature for LightningCLI and builds this from it; the objective and the update read it as given."""

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Optional, Union

from lit_ppo.errors import require
from lit_ppo.learning.learning_rate import ADAPTIVE_LR_EVERY, LearningRate
from lit_ppo.learning.nonfinite import MODES as NONFINITE_MODES

COMPILE_CHOICES = (False, True, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class PPOSettings:
    """PPO's update settings; the arguments of ``PPOModule`` of the same names document each."""

    lr: float = 3e-4
    anneal_lr: bool = False
    clip_coef: float = 0.2
    anneal_clip: bool = False
    clip_vloss: Union[bool, float] = False
    vf_coef: float = 0.5
    ent_coef: Optional[float] = None  # null: by the action space (default_ent_coef), as PPOModule's
    max_grad_norm: Optional[float] = 0.5
    norm_adv: bool = True
    target_kl: Optional[float] = 0.02
    adaptive_lr_kl: Optional[float] = None
    adaptive_lr_every: str = "minibatch"
    decoupled: bool = False
    decoupled_max_weight: Optional[float] = 2.0
    on_nonfinite: str = "stop"
    max_skipped_rollouts: int = 3
    compile: Union[bool, str] = False

    @classmethod
    def parse(cls, **values: Any) -> "PPOSettings":
        """The settings from config values; a bad one is named with its ``model.`` key before anything runs."""
        s = cls(**values)
        require(s.lr > 0, "model.lr", f"must be positive, got {s.lr}.")
        require(s.clip_coef > 0, "model.clip_coef", f"must be positive (PPO's clip epsilon, e.g. 0.2), got {s.clip_coef}.")
        require(s.vf_coef >= 0, "model.vf_coef", f"must be >= 0, got {s.vf_coef}.")
        require(s.ent_coef is None or s.ent_coef >= 0, "model.ent_coef", f"must be >= 0 or null, got {s.ent_coef}.")
        require(s.max_grad_norm is None or s.max_grad_norm > 0, "model.max_grad_norm",
                f"must be positive or null (no clipping), got {s.max_grad_norm}.")
        require(isinstance(s.clip_vloss, bool) or (isinstance(s.clip_vloss, (int, float)) and s.clip_vloss > 0),
                "model.clip_vloss", f"must be false, true (clip with clip_coef) or a positive value clip range, got "
                f"{s.clip_vloss!r}.")
        require(s.target_kl is None or s.target_kl > 0, "model.target_kl", f"must be positive or null, got {s.target_kl}.")
        require(s.adaptive_lr_kl is None or s.adaptive_lr_kl > 0, "model.adaptive_lr_kl",
                f"must be positive or null (a constant or annealed learning rate), got {s.adaptive_lr_kl}.")
        require(s.adaptive_lr_kl is None or not s.anneal_lr, "model.adaptive_lr_kl",
                "and model.anneal_lr both set the learning rate; set model.anneal_lr: false to adapt it to the KL (or "
                "adaptive_lr_kl: null to anneal it).")
        require(s.adaptive_lr_every in ADAPTIVE_LR_EVERY, "model.adaptive_lr_every",
                f"must be one of {ADAPTIVE_LR_EVERY}, got {s.adaptive_lr_every!r}.")
        require(s.decoupled_max_weight is None or s.decoupled_max_weight >= 1.0, "model.decoupled_max_weight",
                f"must be >= 1 (1 truncates every weight above 1, as V-trace's rho-bar of 1) or null (unbounded), got "
                f"{s.decoupled_max_weight}.")
        require(s.on_nonfinite in NONFINITE_MODES, "model.on_nonfinite", f"must be 'stop' or 'skip', got {s.on_nonfinite!r}.")
        require(s.max_skipped_rollouts >= 1, "model.max_skipped_rollouts", f"must be >= 1, got {s.max_skipped_rollouts}.")
        require(s.compile in COMPILE_CHOICES, "model.compile", f"must be one of {COMPILE_CHOICES}, got {s.compile!r}.")
        return s

    @classmethod
    def from_hparams(cls, hparams: Mapping[str, Any]) -> "PPOSettings":
        return cls.parse(**{f.name: hparams[f.name] for f in fields(cls) if f.name in hparams})

    @property
    def value_clip(self) -> Optional[float]:
        """The value clip range (SB3's ``clip_range_vf``), None for none: ``clip_vloss: true`` means ``clip_coef``."""
        return None if self.clip_vloss is False else float(self.clip_coef if self.clip_vloss is True else self.clip_vloss)

    def learning_rate(self) -> LearningRate:
        """What sets each update's learning rate: ``lr``, ``anneal_lr``, ``adaptive_lr_kl``, ``adaptive_lr_every``."""
        return LearningRate(self.lr, self.anneal_lr, self.adaptive_lr_kl, self.adaptive_lr_every)

    def annealed_clip(self, budget_fraction: float) -> float:
        """``clip_coef`` with ``budget_fraction`` of the step budget done: linearly to 0 where annealed."""
        return self.clip_coef * (1.0 - budget_fraction if self.anneal_clip else 1.0)
