"""Errors lit_ppo raises for bad input: each names the setting or file at fault and the fix."""


class ConfigError(ValueError):
    """A setting (named in the message as its config key, e.g. ``data.num_envs``) cannot work."""


class EnvStepError(RuntimeError):
    """An environment raised; the message names the env id, the rank, the sub-environment and its step.

    ``every_rank``: every process raised this same error together (the CLI prints it once, on rank 0)."""

    def __init__(self, message: str, every_rank: bool = False) -> None:
        super().__init__(message)
        self.every_rank = every_rank


def require(condition: bool, key: str, message: str) -> None:
    """Raise a :class:`ConfigError` for config key ``key`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(f"{key}: {message}")


class NonFiniteError(RuntimeError):
    """A loss term or the parameters became NaN/inf; the message names the iteration, the quantity and the cause
    where the rollout shows one. ``every_rank``: as for :class:`EnvStepError`."""

    def __init__(self, message: str, every_rank: bool = False) -> None:
        super().__init__(message)
        self.every_rank = every_rank
