"""The bookkeeping of a benchmark's fit attempts in its run directory (``fit.json``), for ``learning.py``: files
replaced in one step, and an attempt whose runner was killed outright told apart from one that still runs."""

import json
import os
from pathlib import Path
from typing import Optional


def write_json(path: Path, data: dict) -> None:
    """Replace ``path`` with ``data`` in one step (a kill mid-write leaves the old file, never half a file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=1))
    os.replace(partial, path)


def fit_running(pid: Optional[int]) -> bool:
    """Whether ``pid`` is still a ``python -m lit_ppo`` process (Linux's /proc; elsewhere: whether it is alive)."""
    if pid is None:
        return False
    if Path("/proc/self").exists():  # checks it is a fit, not another process that got the pid since
        try:
            return b"lit_ppo" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def close_killed_attempt(attempt: dict, directory: Path, last_saved: Optional[Path]) -> None:
    """An attempt left "running": its driver was killed outright (SIGKILL, a session's end) before it could write.
    If its fit still runs, starting another beside it would corrupt both: refuse. Otherwise keep the attempt,
    timed to its last checkpoint (later work was lost), so the wall time and process count stay honest."""
    if fit_running(attempt.get("pid")):
        raise RuntimeError(f"a fit started by a killed runner still runs in {directory} (pid {attempt['pid']}): "
                           f"wait for it to end or stop it (kill {attempt['pid']}: it saves last.ckpt at its next "
                           "rollout), then run the same command again")
    saved_at = last_saved.stat().st_mtime if last_saved is not None else attempt["started"]
    attempt.update(exit="killed", wall_s=round(max(0.0, saved_at - attempt["started"]), 1))
