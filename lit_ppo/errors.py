"""Errors lit_ppo raises for bad input: each names the setting or file at fault and the fix."""

from typing import Optional


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


def failing_sub_env(envs, err: BaseException) -> Optional[int]:
    """The index of the sub-environment whose method raised ``err``: in a ``SyncVectorEnv``, the one whose method's
    frame is in the traceback; in an ``AsyncVectorEnv``, the first worker whose pipe it closed on the error; None
    where it cannot be told."""
    pipes = getattr(envs.unwrapped, "parent_pipes", None)
    if isinstance(pipes, list) and None in pipes:
        return pipes.index(None)
    sub_envs = getattr(envs.unwrapped, "envs", None)
    if not isinstance(sub_envs, (list, tuple)):
        return None
    positions = {id(env): i for i, env in enumerate(sub_envs)}
    tb = err.__traceback__
    while tb is not None:
        index = positions.get(id(tb.tb_frame.f_locals.get("self")))
        if index is not None:
            return index
        tb = tb.tb_next
    return None


def where_env_failed(envs, err: BaseException, steps_taken: int) -> str:
    """Which sub-environment of ``envs`` raised ``err``, and at which of its own steps (each is stepped once per vector
    step), after ``steps_taken`` environment steps of this rank."""
    index = failing_sub_env(envs, err)
    which = f"sub-environment {index}" if index is not None else "a sub-environment"
    return f", {which} at its step {steps_taken // envs.num_envs} (environment step {steps_taken} of this rank)"


class CollectorError(EnvStepError):
    """The collector process ended without a word (killed, or crashed in native code, e.g. an environment's), or
    raised something that does not pickle; reported as an environment failure is."""
