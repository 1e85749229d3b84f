"""The collector process's side of ``data.overlap`` (:mod:`lit_ppo.collection.overlap.dataset` is the learner's side).

This module and what it imports stay free of Lightning (``lit_ppo/__init__`` imports its public names lazily, and
``lit_ppo.collection.acting`` imports Lightning only to announce a decision): a spawned process imports the module of its
target function, and with Lightning imported a collector took 5.0 s from its start to its first CartPole rollout,
1.55 s without (``python benchmarks/archive/collector_startup.py``, medians of 6, at 748af20 and after; idle 2-core
AMD EPYC Zen 3, 2026-12-03).
"""

import multiprocessing
import pickle
import queue
import signal
from typing import Any, Optional

import torch
import torch.multiprocessing as mp

from lit_ppo.collection.acting import PolicyPlacement
from lit_ppo.errors import CollectorError
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.collection.overlap.transport import (CollectorFailed, ResumePoint, RolloutReady, SharedTensors,
                                                  split_rollout)

POLL_S = 0.2  # how often a blocked side checks that the other is still there


def collect_in_process(recipe, policy: ActorCritic, behaviour: dict[str, torch.Tensor], resume: ResumePoint,
                       weight_slots: SharedTensors, weights: Any, rollouts: Any, stop: Any) -> None:
    """The collector process: builds the rollout stream and serves one rollout per weights version, each stamped
    one version behind the learner (``policy_lag=1``) and timed with how long it waited for its weights."""
    # The learner owns shutdown (lit_ppo.collection.overlap.dataset's docstring): a SIGTERM or Ctrl+C sent to the whole process group (as
    # SLURM and terminals do) must not end the collector before the learner has saved at the rollout boundary.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)  # acting is small and serial: the other cores are the learner's
    # A spawned process starts its own children by spawn too; async env workers start here as the synchronous path
    # starts them (the platform's default: fork on Linux), whose semaphores are not named: a collector killed with
    # its workers then leaves none for the resource tracker to warn about as leaked.
    multiprocessing.set_start_method(None, force=True)
    dataset = None
    try:
        policy.load_state_dict(behaviour)
        dataset = recipe.build(PolicyPlacement(policy, "cpu"), policy_lag=1)
        note = None
        if resume.collector is not None:
            note = dataset.load_state_dict({"collector": resume.collector})
        elif resume.iterations is not None:
            dataset.restart_at(resume.iterations, resume.env_steps)
        waiting = dataset.clock.phase("weights_wait_ms")  # 0 for the first rollout, which waits for nothing
        slots: Optional[SharedTensors] = None
        number = 0  # rollouts collected by this process: its rollout slots alternate by this
        while not dataset.budget_spent:
            if number:
                with waiting:
                    version = _next_version(weights, stop)
                if version is None:
                    return
                policy.load_state_dict(weight_slots.view(version))
            tensors, rest = split_rollout(next(iter(dataset)))
            new_slots = slots is None
            slots = SharedTensors(tensors) if new_slots else slots
            slots.write(number, tensors)
            state = pickle.dumps(dataset.collector.state_dict())
            rollouts.put(RolloutReady(number, rest, state, note, slots if new_slots else None))
            number, note = number + 1, None
        while not stop.wait(POLL_S) and _learner_alive():  # the budget is collected: wait to be stopped
            pass
    except Exception as err:  # sent back and raised by the learner, as the synchronous path raises it
        rollouts.put(CollectorFailed(_sendable(err)))
        # Stay until stopped: the shared tensors of a message still queued (the first rollout's slots) reach the
        # learner through this process, which hands their file descriptors over as the learner reads the message;
        # a collector gone by then failed that read (EOFError) instead of reporting this error.
        while not stop.wait(POLL_S) and _learner_alive():
            pass
    finally:
        if stop.is_set():
            rollouts.cancel_join_thread()  # nobody reads a rollout collected after the stop
        if dataset is not None:
            dataset.close()


def _next_version(weights: Any, stop: Any) -> Optional[int]:
    while not stop.is_set() and _learner_alive():
        try:
            return weights.get(timeout=POLL_S)
        except queue.Empty:
            pass
    return None


def _learner_alive() -> bool:
    parent = mp.parent_process()
    return parent is None or parent.is_alive()


def _sendable(err: Exception) -> Exception:
    """``err`` itself where it pickles, else its type and message as a :class:`CollectorError`."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        return CollectorError(f"the collector process raised {type(err).__name__}: {err}")
