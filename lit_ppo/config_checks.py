"""What is checked on the command line and its config files before LightningCLI parses them: files that are not
YAML (jsonargparse would name ``"<unicode string>", line 2`` instead of the file) and logger classes that do not
import (jsonargparse would print a type dump without the fix)."""

import importlib
import importlib.util
import os
from typing import Any, Iterator, Optional

import yaml  # jsonargparse's dependency

from lit_ppo.errors import ConfigError

LOGGERS = "TensorBoardLogger, CSVLogger, MLFlowLogger, WandbLogger, CometLogger, NeptuneLogger"
# Lightning loggers that import their package only when made: (package, how to install it)
LOGGER_PACKAGES = {"WandbLogger": ("wandb", "pip install 'lit_ppo[wandb]'"),
                   "MLFlowLogger": ("mlflow", "pip install 'lit_ppo[mlflow]'"),
                   "CometLogger": ("comet_ml", "pip install comet-ml"),
                   "NeptuneLogger": ("neptune", "pip install neptune")}


def config_files(args: Optional[list[str]]) -> Iterator[tuple[str, str]]:
    """``(name, text)`` of each ``--config`` a command line gives: a file's path and content, or a YAML string."""
    args = [str(a) for a in args or []]
    for i, arg in enumerate(args):
        name, has_value, value = arg.partition("=")
        if name not in ("--config", "-c"):
            continue
        source = value if has_value else (args[i + 1] if i + 1 < len(args) else "")
        if os.path.isfile(source):
            with open(source) as f:
                yield source, f.read()
        else:
            yield "the --config string", source


def parsed_configs(args: Optional[list[str]]) -> Iterator[dict[str, Any]]:
    """Each ``--config`` of ``args`` parsed (a file that is not YAML raises :class:`ConfigError` naming it)."""
    for name, text in config_files(args):
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            tab = " YAML indents with spaces only: replace the tab(s)." if "\t" in text else ""
            raise ConfigError(f"--config {name}: not valid YAML{where}: {getattr(err, 'problem', None) or err}."
                              f"{tab}") from None
        if isinstance(config, dict):
            yield config


def check_command_line(args: Optional[list[str]]) -> None:
    """The config files parse, and every logger class named (in them or as ``--trainer.logger``) imports."""
    paths = []
    for config in parsed_configs(args):
        logger = (config.get("trainer") or {}).get("logger") if isinstance(config.get("trainer"), dict) else None
        for entry in logger if isinstance(logger, list) else [logger]:
            paths.append(entry.get("class_path") if isinstance(entry, dict) else entry)
    args = [str(a) for a in args or []]
    for i, arg in enumerate(args):
        name, has_value, value = arg.partition("=")
        if name in ("--trainer.logger", "--trainer.logger.class_path"):
            paths.append(value if has_value else (args[i + 1] if i + 1 < len(args) else None))
    for path in paths:
        if isinstance(path, str) and "." in path and not path.lstrip().startswith(("{", "[")):
            _check_importable(path)
        elif isinstance(path, str) and _bare_name(path):
            _check_known_logger(path.strip())


def _check_importable(class_path: str) -> None:
    module, _, name = class_path.rpartition(".")
    try:
        getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"trainer.logger: cannot import {class_path} ({type(err).__name__}: {err}). Lightning's "
                          f"loggers are lightning.pytorch.loggers.{{{LOGGERS}}}; false logs nothing.") from None
    if name in LOGGER_PACKAGES and importlib.util.find_spec(LOGGER_PACKAGES[name][0]) is None:
        package, install = LOGGER_PACKAGES[name]
        raise ConfigError(f"trainer.logger: {name} needs the {package} package, which is not installed: {install} "
                          "(or leave that logger out).")


def _bare_name(value: str) -> bool:
    """A class name without its module (``CSVLogger``), as jsonargparse resolves among the loggers imported; not a
    YAML value (``false``, ``null``)."""
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return False
    return isinstance(parsed, str) and parsed.strip().isidentifier()


def _check_known_logger(name: str) -> None:
    # jsonargparse takes a bare name only for a Logger subclass already imported; anything else ended in its dump of
    # every type the union allows, without the fix
    from lightning.pytorch.loggers import Logger

    known, todo = set(), [Logger]
    while todo:
        cls = todo.pop()
        known.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    if name not in known:
        raise ConfigError(f"trainer.logger: cannot import {name} (no logger class of that name is imported). "
                          f"Lightning's loggers are lightning.pytorch.loggers.{{{LOGGERS}}} (by that name or the "
                          "whole path; your own by its whole path, my_pkg.MyLogger); false logs nothing.")


def explicit_settings(args: Optional[list[str]]) -> set[str]:
    """The dotted keys (``model.recurrent``, ``data.env_id``, ...) that a command line ``args`` sets: on the command
    line itself or in a config file it names (``--config FILE``, a YAML string also works)."""
    keys: set[str] = set()
    for config in parsed_configs(args):
        for section, body in config.items():
            keys.add(str(section))
            keys.update(f"{section}.{key}" for key in (body if isinstance(body, dict) else {}))
    keys.update(str(arg)[2:].partition("=")[0] for arg in args or [] if str(arg).startswith("--"))
    return keys
