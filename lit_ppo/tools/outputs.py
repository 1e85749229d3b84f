"""A tool's output file: checked before the work that produces it (a study's trials, an export), and written so that
nothing is lost: never over a checkpoint or the tool's own input, and in one atomic step.

Writability is tried, not asked: ``os.access`` says yes to everything for root (``/proc`` included), so a temporary
file is made and removed in the directory the output goes to.
"""

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Optional

from lit_ppo.errors import ConfigError


def check_output(path: Path, option: str, inputs: Sequence[Optional[Path]] = ()) -> None:
    """Raise a :class:`ConfigError` naming ``option`` unless ``path`` may be written: it is not a directory, not one
    of ``inputs`` (the same file by any name), not an existing checkpoint (by its content, whatever its name), and
    its directory (or the nearest existing one: the missing folders are made when writing) takes a new file. An
    existing file that is none of these is replaced when the output is written. Nothing is left behind here."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{option}: {path} is a directory; give a file name (e.g. {path / 'out'}).")
    if path.exists():
        for source in inputs:
            if source is not None and Path(source).exists() and os.path.samefile(path, source):
                raise ConfigError(f"{option}: {path} is the input file {source} itself, which writing would destroy; "
                                  "give another file name.")
        from lit_ppo.checkpointing.files import file_kind  # imports torch: only where there is a file to look at

        if file_kind(path) == "checkpoint":
            raise ConfigError(f"{option}: {path} is a checkpoint, which writing would destroy; give another file "
                              "name (or move the checkpoint first).")
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{option}: cannot write {path}: {ancestor} is a file, not a directory; choose another "
                          "path.")
    try:
        if path.exists():
            with open(path, "ab"):  # opened for writing without changing it
                pass
    except OSError as err:
        raise ConfigError(f"{option}: {path} exists and cannot be written ({err.strerror or err}); choose another "
                          "file.") from None
    try:  # the output is written beside its path and renamed over it: the directory must take a new file
        fd, probe = tempfile.mkstemp(dir=ancestor, prefix=".lit_ppo-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ConfigError(f"{option}: cannot write {path}: the directory {ancestor} is not writable "
                          f"({err.strerror or err}); choose another path.") from None


@contextlib.contextmanager
def replacing(path: Path, option: str) -> Iterator[Path]:
    """A temporary file beside ``path`` to write the output to, which replaces ``path`` in one step when the block
    ends without an error (and is removed otherwise): a failed write or check leaves an earlier ``path`` as it was.
    An OSError while writing becomes a :class:`ConfigError` naming ``option``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
        os.close(fd)
        os.chmod(name, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())  # not mkstemp's 0600
    except OSError as err:
        raise ConfigError(f"{option}: cannot write {path} ({err.strerror or err}); choose another path.") from None
    temporary = Path(name)
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as err:
        raise ConfigError(f"{option}: cannot write {path} ({err.strerror or err}); choose another path.") from None
    finally:
        temporary.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0o022)  # read by setting it: there is no other way
    os.umask(mask)
    return mask
