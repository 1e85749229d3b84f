import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

# Imported at collection: Lightning's log handlers bind to the stderr of the moment they are made, which must not
# be one test's captured stream (in-process CLI runs would then write to it after it is closed).
import lit_ppo.cli  # noqa: F401
from tests import cli_server

REPO = Path(__file__).resolve().parents[1]
CLI_SERVER_VAR = "LIT_PPO_TEST_CLI_SERVER"  # the fork server's socket, for run_cli and tests/docs_shim.py


class CounterEnv(gym.Env):
    """Observation = steps taken so far; reward 1 per step; ends only by the TimeLimit (or terminates at
    ``terminate_at`` when given). Its value function is known in closed form, which the tests use."""

    def __init__(self, terminate_at=None):
        self.observation_space = gym.spaces.Box(0.0, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.terminate_at, self.t = terminate_at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return np.array([float(self.t)], np.float32), 1.0, terminated, False, {}


gym.register("LitPPOTest/Counter-v0", entry_point=CounterEnv, max_episode_steps=3)
gym.register("LitPPOTest/CounterEnds-v0", entry_point=CounterEnv, max_episode_steps=10, kwargs={"terminate_at": 3})


# TensorBoard and CSV loggers at once, as a config file's `trainer.logger` list (test_callbacks, test_loggers).
TB_AND_CSV_LOGGERS_YAML = """
trainer:
  logger:
    - class_path: lightning.pytorch.loggers.TensorBoardLogger
      init_args: {save_dir: logs, name: tb}
    - class_path: lightning.pytorch.loggers.CSVLogger
      init_args: {save_dir: logs, name: csv}
"""


def run_cli(*args, cwd, timeout=300, check=True, extra_env=None):
    """Run ``python -m lit_ppo ...`` in a fresh process, as a user would (:func:`run_cli_alone`: in a session of its
    own, which must leave no process behind)."""
    proc = run_cli_alone(*args, cwd=cwd, timeout=timeout, extra_env=extra_env)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}")
    return proc


def session_processes(sid: int) -> list:
    """The live processes of session ``sid`` (zombies, already ended, left out)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return found


def run_cli_alone(*args, cwd, timeout=300, extra_env=None, settle=5.0):
    """``run_cli`` in a session of its own, which must end within ``timeout`` s (a hang fails the test instead of
    stalling the suite) and leave no process of that session alive: every child it started (environment workers,
    DDP ranks, a collector) was joined or ended with it. Returns the finished process (returncode, stdout,
    stderr); never checks the return code. The process is forked from the suite's fork server
    (``tests/cli_server.py``) where one runs, else started as ``python -m lit_ppo``."""
    import tempfile
    import time

    # The repository root on the path lets the CLI import test environments (tests.faulty_envs).
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.update(extra_env or {})
    args = [str(a) for a in args]
    command = f"python -m lit_ppo {' '.join(args)}"
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, open(os.devnull) as null:
        if os.environ.get(CLI_SERVER_VAR):
            started: list = []
            try:
                code = cli_server.request(os.environ[CLI_SERVER_VAR], "lit_ppo", args, str(cwd), env,
                                          (null.fileno(), out.fileno(), err.fileno()), started.append, timeout)
            except TimeoutError:
                _timed_out(command, started[0], timeout, err)
            sid = started[0]
        else:
            proc = subprocess.Popen([sys.executable, "-m", "lit_ppo", *args], cwd=cwd, env=env, stdin=null,
                                    stdout=out, stderr=err, start_new_session=True)
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _timed_out(command, proc.pid, timeout, err)
            sid = proc.pid
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    deadline = time.monotonic() + settle
    while (left := session_processes(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in left:
        p.kill()
    assert not left, f"{len(left)} process(es) outlived the run: {[p.cmdline() for p in left]}\n{stderr[-3000:]}"
    return subprocess.CompletedProcess(command, code, stdout, stderr)


def _timed_out(command: str, sid: int, timeout: float, err) -> None:
    left = session_processes(sid)
    for p in left:
        p.kill()
    err.seek(0)
    raise AssertionError(f"{command} still ran after {timeout} s ({len(left)} process(es) in its session)\n"
                         f"stderr:\n{err.read()[-3000:]}")


@pytest.fixture(scope="session", autouse=True)
def cli_fork_server(tmp_path_factory):
    """One fork server per test process (``tests/cli_server.py``) for the CLI runs of ``run_cli`` and of the
    documentation's examples; stopped and joined at the session's end."""
    address = str(tmp_path_factory.mktemp("cli") / "socket")
    server = subprocess.Popen([sys.executable, str(REPO / "tests" / "cli_server.py"), address],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert server.stdout.readline().strip() == "ready", "the CLI fork server did not start"
    os.environ[CLI_SERVER_VAR] = address
    yield address
    del os.environ[CLI_SERVER_VAR]
    server.terminate()
    server.wait(timeout=30)
    server.stdout.close()


@pytest.fixture
def no_child_left():
    """Asserts, after the test, that every child process the test's own process started has ended (checked after a
    few seconds of grace): for in-process runs (``cli_in_process``) that start environment workers."""
    import time

    import psutil

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    deadline = time.monotonic() + 5.0
    while (left := [p for p in me.children(recursive=True) if p.pid not in before and p.is_running()
                    and p.status() != psutil.STATUS_ZOMBIE and not _resource_tracker(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in left:
        p.kill()
    assert not left, f"{len(left)} child process(es) outlived the test: {[p.cmdline() for p in left]}"


def _resource_tracker(proc) -> bool:
    """multiprocessing's resource tracker: one per interpreter, started by the first spawned process that shares
    memory (a data.overlap collector), ending when this interpreter does (the fresh-process tests check that)."""
    try:
        return "multiprocessing.resource_tracker" in " ".join(proc.cmdline())
    except Exception:
        return False


def wait_for_file(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until ``path`` exists while ``proc`` runs (a checkpoint to appear before a signal is sent)."""
    import time

    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def cli_in_process(monkeypatch, capsys):
    """``python -m lit_ppo ...`` run in this process (for what needs no fresh process: parsing, bad input),
    from ``cwd``, which is also on the import path as it is for ``python -m``. Returns returncode, stdout and
    stderr as ``run_cli`` does."""
    from types import SimpleNamespace

    from lit_ppo.cli import main

    def run(*args, cwd):
        monkeypatch.chdir(cwd)
        monkeypatch.syspath_prepend(str(cwd))
        monkeypatch.setattr(sys, "argv", ["lit_ppo"])  # the command line is args alone
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    return run
