"""A fork server for the suite's ``python -m lit_ppo`` runs: every run is still a new process, but forked from one that
has already imported torch, Lightning and lit_ppo, instead of an interpreter that imports them again.

Why: a CLI run in the suite is mostly its start-up. Importing ``lit_ppo.cli`` (torch, Lightning, torchmetrics,
gymnasium) takes ~2.5-5 s on the 2-core CI machine, a two-rollout fit ~1 s; the suite starts ~90 such processes
(``run_cli`` and the documentation's shell examples through ``tests/docs_shim.py``). Measured in this repository:
see ``tests/durations.txt`` (before/after lines).

What the child gets is what a fresh ``python -m lit_ppo`` gets: its own process and session (``os.setsid``, so a
test can find and end every process it started, as ``run_cli_alone`` checks), the caller's working directory,
environment, ``sys.path`` (the working directory first, then ``PYTHONPATH``) and standard streams (passed as file
descriptors), and its exit status. Nothing of another run is in it: the server only imports modules, it never runs
a fit. Signals sent to the child's session do not reach the server.

Protocol, one request per connection on a Unix socket: the client sends one JSON line
``{"entry": "lit_ppo" | "docs_shim", "args": [...], "cwd": ..., "env": {...}}`` with its stdin, stdout and stderr
as ancillary file descriptors; the server answers ``{"pid": N}`` when the child runs and ``{"status": S}`` when it
ended (S as ``subprocess`` reports it: negative for a signal).

    python tests/cli_server.py SOCKET      # serves until SIGTERM or its parent ends
"""

import json
import os
import runpy
import signal
import socket
import sys
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]


def request(address: str, entry: str, args: list[str], cwd: str, env: dict, streams: tuple[int, int, int],
            on_start=None, timeout: Optional[float] = None) -> int:
    """Run ``entry`` with ``args`` in a child of the server at ``address``; its exit status. ``on_start(pid)`` is
    called once the child runs; ``timeout`` (seconds) raises ``TimeoutError`` (the caller ends the child)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(address)
        message = json.dumps({"entry": entry, "args": list(args), "cwd": str(cwd), "env": env}).encode() + b"\n"
        socket.send_fds(sock, [message], list(streams))
        sock.settimeout(timeout)
        reader = sock.makefile("rb")
        try:
            pid = json.loads(reader.readline())["pid"]
            if on_start is not None:
                on_start(pid)
            line = reader.readline()
        except socket.timeout as err:
            raise TimeoutError from err
        if not line:
            raise RuntimeError("the CLI fork server ended before the run did")
        return int(json.loads(line)["status"])


def _child(conn: socket.socket, server: socket.socket, request_: dict, fds: list[int]) -> None:
    """In the forked child: become the caller's ``python -m`` and exit with its status."""
    server.close()
    conn.close()
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request_["cwd"])
    os.environ.clear()
    os.environ.update(request_["env"])
    extra = [p for p in request_["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [request_["cwd"], *extra, *[p for p in sys.path if p != str(Path(__file__).parent)]]
    code = 0
    try:
        if request_["entry"] == "docs_shim":
            from tests import docs_shim

            code = docs_shim.lit_ppo(request_["args"])
        else:
            sys.argv = ["lit_ppo", *request_["args"]]
            runpy.run_module("lit_ppo", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if isinstance(exit_.code, str):  # as the interpreter does: the message on stderr, status 1
            print(exit_.code, file=sys.stderr)
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)  # a normal exit: atexit handlers and finalizers run as in any process


def _warm_up_the_parser() -> None:
    """Parse (never run) a shipped config once, so that every child inherits jsonargparse's resolved class
    signatures instead of resolving them again: a two-rollout CartPole fit forked from here took 0.72 s before
    and 0.34 s after (median of 3 each, measured with the MuJoCo runs in the background). Only memoized
    signature lookups are shared; ``--print_config`` instantiates nothing and leaves no file."""
    import contextlib
    import io

    sys.argv = ["lit_ppo", "fit", "--config", "cartpole.yaml", "--print_config"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        runpy.run_module("lit_ppo", run_name="__main__", alter_sys=True)


def serve(address: str) -> None:
    # This checkout's lit_ppo (as run_cli's PYTHONPATH gives a fresh process), and tests.docs_shim, tests.faulty_envs
    sys.path.insert(0, str(REPO))
    import lit_ppo.cli  # noqa: F401  (what every child would import first: torch, Lightning, gymnasium)
    import lit_ppo.tools.export  # noqa: F401
    import lit_ppo.tools.plot  # noqa: F401

    _warm_up_the_parser()

    parent = os.getppid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(address)
        server.listen(4)
        server.settimeout(1.0)
        print("ready", flush=True)
        while os.getppid() == parent:  # the test session that started it is still there
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(None)
                data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                while not data.endswith(b"\n"):
                    data += conn.recv(1 << 20)
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    _child(conn, server, json.loads(data), fds)
                for fd in fds:
                    os.close(fd)
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
                except OSError:
                    pass  # the client gave up (its timeout): it ends the child's session itself


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(sys.argv[1])
