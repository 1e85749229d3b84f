"""The child processes lit_ppo starts (AsyncVectorEnv workers): what they inherit, and that none outlives its run
(:class:`lit_ppo.callbacks.CloseEnvironmentsOnError` closes them when a fit fails).

A forked worker inherits its parent's signal handlers. Lightning's SIGTERM handler only records the signal, for the
Trainer to act on between steps; a worker that inherited it printed ``[rank: 0] Received SIGTERM: 15`` when
multiprocessing terminated it at exit, and ran on, so the run never ended. A worker therefore starts with the
default SIGTERM (terminating it ends it) and ignores SIGINT: Ctrl+C reaches the whole process group, and the parent
owns the workers' shutdown (``close``), after saving its checkpoint.
"""

import functools
import signal
from typing import Any, Callable


def in_worker(make: Callable[[], Any]) -> Callable[[], Any]:
    """``make`` (a picklable environment factory) wrapped to reset the signal handling of the process it runs in
    before it builds the environment: what an ``AsyncVectorEnv`` worker runs first."""
    return functools.partial(_reset_signals_then, make)


def _reset_signals_then(make: Callable[[], Any]) -> Any:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return make()
