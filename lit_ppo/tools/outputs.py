"""Checks on a tool's output file, made before the work that produces it (a study's trials, an export)."""

import os
from pathlib import Path

from lit_ppo.errors import ConfigError


def check_writable(path: Path, option: str) -> None:
    """Raise a :class:`ConfigError` naming ``option`` unless ``path`` can be written: it is not a directory, and its
    nearest existing ancestor is a writable directory (the missing folders between are made when writing).
    Nothing is created here."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{option}: {path} is a directory; give a file name (e.g. {path / 'out'}).")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{option}: {path} exists and cannot be written (permissions); choose another file.")
        return
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{option}: cannot write {path}: {ancestor} is a file, not a directory; choose another "
                          "path.")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"{option}: cannot write {path}: the directory {ancestor} is not writable; choose another "
                          "path.")
