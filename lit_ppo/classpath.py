"""Objects named in a config: ``"pkg.module.Name"`` or ``{class_path: pkg.module.Name, init_args: {...}}``.

Plain data in, a callable out: the config (and checkpoint hyperparameters) keep the names, and the object is
built where it is used (in each async worker process for environment wrappers, in the policy for a network).
"""

import functools
import importlib
from typing import Any, Callable, Union

from lit_ppo.errors import ConfigError

ClassPathConfig = Union[str, dict[str, Any]]


def resolve(config: ClassPathConfig, key: str) -> tuple[str, Callable[..., Any]]:
    """``(class_path, callable)`` for the config at ``key``: the named object with ``init_args`` bound."""
    if isinstance(config, str):
        class_path, init_args = config, {}
    elif isinstance(config, dict) and "class_path" in config:
        class_path, init_args = config["class_path"], dict(config.get("init_args") or {})
        # ``--data.vectorization.init_args.opponent X`` over a config's dict: jsonargparse sets the key beside
        # class_path (a plain dict has no init_args to it); it overrides the config's init_args
        init_args.update({k: v for k, v in config.items() if k not in ("class_path", "init_args")})
    else:
        raise ConfigError(f"{key}: expected a class path or {{class_path: ..., init_args: {{...}}}}, got {config!r}.")
    module_name, _, attr = str(class_path).rpartition(".")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except Exception as err:
        raise ConfigError(f"{key}: cannot import {class_path!r}: {type(err).__name__}: {err}") from err
    if not callable(target):
        raise ConfigError(f"{key}: {class_path!r} is not a class or function.")
    return class_path, functools.partial(target, **init_args)
