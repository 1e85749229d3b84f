"""The child processes lit_ppo starts (AsyncVectorEnv workers): what they inherit, and that none outlives its run
(:class:`lit_ppo.callbacks.CloseEnvironmentsOnError` closes them when a fit fails).

A forked worker inherits its parent's signal handlers. Lightning's SIGTERM handler only records the signal, for the
Trainer to act on between steps; a worker that inherited it printed ``[rank: 0] Received SIGTERM: 15`` when
multiprocessing terminated it at exit, and ran on, so the run never ended. A worker therefore starts with the
default SIGTERM (terminating it ends it) and ignores SIGINT: Ctrl+C reaches the whole process group, and the parent
owns the workers' shutdown (``close``), after saving its checkpoint.

A worker whose parent is gone (killed, or crashed in native code) finds its pipe closed, and gymnasium's worker loop
then fails on it with tracebacks that buried the parent's own one-line error: such a worker says nothing more (its
stderr is dropped once its parent has ended; nobody is left to report to, and the run's error says what happened).
"""

import functools
import multiprocessing
import os
import signal
import sys
from typing import Any, Callable, TextIO


def in_worker(make: Callable[[], Any]) -> Callable[[], Any]:
    """``make`` (a picklable environment factory) wrapped to reset the signal handling of the process it runs in
    before it builds the environment: what an ``AsyncVectorEnv`` worker runs first."""
    return functools.partial(_reset_signals_then, make)


def _reset_signals_then(make: Callable[[], Any]) -> Any:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None and not isinstance(sys.stderr, QuietOrphan):
        sys.stderr = QuietOrphan(sys.stderr, parent)
    return make()


class QuietOrphan:
    """``stream`` until ``parent`` (a ``multiprocessing`` parent process) has ended, then nothing. Checked at each
    write by this process's parent id: the kernel hands an orphan to another parent as its parent exits, before the
    worker has woken on its closed pipe and reached a write (the parent's sentinel may be held open by a sibling
    forked after it)."""

    def __init__(self, stream: TextIO, parent: Any) -> None:
        self.stream, self.parent = stream, parent

    def write(self, text: str) -> int:
        return self.stream.write(text) if os.getppid() == self.parent.pid else len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding, ...: the stream's own
        return getattr(self.stream, name)
