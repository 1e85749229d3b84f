"""``data.overlap``: the next rollout is collected in a process of its own while the learner learns from this one.

The collector process (one per rank, spawned) builds the same rollout stream as the synchronous path from the
same :class:`lit_ppo.collection.recipe.RolloutRecipe` (vector env, sampling generator, GAE) and acts with a CPU copy
of the policy, normalization statistics included. Two handshakes keep it exactly one policy version behind, as
Cleanba's two size-one queues do, so timing decides nothing and a seed gives the same numbers:

- the learner, at the start of rollout ``j``'s iteration, sends its weights (version ``j``: before the update on
  rollout ``j``) and then waits for rollout ``j``;
- the collector collects its first rollout with the weights it started with, and waits for the next weights
  before every later one: rollout ``j`` is collected with version ``j - 1`` (rollouts 0 and 1 with the initial).

Weights go out once per rollout and rollouts come back once per rollout, through shared memory allocated once
(:mod:`lit_ppo.collection.overlap.transport`): a queue carries only a version number or a small message, never a step.
Each rollout comes with the collector's state at its end (the start of the next), which the learner's checkpoint
holds with the weights that collect the next rollout: a resumed run re-collects the rollout that was in flight exactly.

The process ignores SIGTERM and SIGINT (the learner owns shutdown: a signal ends the learner's fit at a rollout
boundary, after which it stops and joins the collector), exits by itself if the learner dies, and sends its errors
back, where they are raised as in the synchronous path. The process's side lives in
:mod:`lit_ppo.collection.overlap.worker`.
"""

import pickle
import queue
from collections.abc import Callable, Iterator
from typing import Any, Optional

import torch
import torch.multiprocessing as mp
from lightning.pytorch.utilities import rank_zero_warn
from torch.utils.data import IterableDataset

from lit_ppo.collection.acting import PolicyPlacement, cpu_copy
from lit_ppo.collection.rollout import Rollout
from lit_ppo.collection.overlap.worker import POLL_S, collect_in_process
from lit_ppo.collection.datasets import raise_first_failure
from lit_ppo.errors import CollectorError, ConfigError, EnvStepError
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.collection.clock import PhaseClock
from lit_ppo.collection.overlap.transport import CollectorFailed, Message, ResumePoint, RolloutReady, SharedTensors

STOP_TIMEOUT_S = 10.0  # how long a stopped collector may take to close its environments before it is ended


def snapshot(policy: ActorCritic) -> dict[str, torch.Tensor]:
    """The policy's weights and statistics as CPU tensors of their own (a later update does not change them)."""
    return {name: value.detach().to("cpu", copy=True) for name, value in policy.state_dict().items()}


class CollectorProcess:
    """The collector process of one rank and its two queues; :meth:`close` stops it and joins it."""

    def __init__(self, recipe, policy: ActorCritic, behaviour: dict[str, torch.Tensor], resume: ResumePoint) -> None:
        context = mp.get_context("spawn")  # not forked: CUDA may be initialized here, and no handler is inherited
        self.rank = recipe.rank
        self.weights, self.rollouts, self.stop = context.Queue(), context.Queue(), context.Event()
        self.weight_slots, self.versions_sent = SharedTensors(behaviour), 0
        self.rollout_slots: Optional[SharedTensors] = None  # the collector's, handed over with its first rollout
        self.process = context.Process(target=collect_in_process, name=f"lit_ppo-collector-{recipe.rank}",
                                       args=(recipe, policy, behaviour, resume, self.weight_slots, self.weights,
                                             self.rollouts, self.stop))
        try:
            self.process.start()
        except Exception as err:  # what it is built from must pickle (and be importable in a new process)
            raise ConfigError(
                f"data.overlap: the collector process could not be started ({type(err).__name__}: {err}). Everything "
                "it builds (the environment, wrappers, your network class) must be importable by name from a new "
                "process: define them in a module rather than in __main__ or a notebook, or set data.overlap: false."
            ) from err

    def send(self, weights: dict[str, torch.Tensor]) -> None:
        self.weight_slots.write(self.versions_sent, weights)
        self.weights.put(self.versions_sent)
        self.versions_sent += 1

    def receive(self) -> Message:
        """The collector's next message; the rollout slots come with the first rollout and are kept."""
        message = self._next_message()
        if isinstance(message, RolloutReady) and message.slots is not None:
            self.rollout_slots = message.slots
        return message

    def _next_message(self) -> Message:
        while True:
            try:
                return self.rollouts.get(timeout=POLL_S)
            except (EOFError, OSError) as err:  # its shared tensors come through the collector, which has ended
                return CollectorFailed(CollectorError(
                    f"the collector process of rank {self.rank} ended (exit code {self.process.exitcode}) before its "
                    f"message could be read ({type(err).__name__}); the last checkpoint saved before it is unchanged."))
            except queue.Empty:
                if not self.process.is_alive():
                    try:  # its last message may still be on the way
                        return self.rollouts.get(timeout=POLL_S)
                    except queue.Empty:
                        return CollectorFailed(CollectorError(
                            f"the collector process of rank {self.rank} ended (exit code {self.process.exitcode}) "
                            "without a rollout; the last checkpoint saved before it is unchanged."))

    def close(self) -> None:
        self.stop.set()
        self.weights.cancel_join_thread()  # weights it will not read must not keep this process from exiting
        self.process.join(STOP_TIMEOUT_S)
        if self.process.is_alive():  # it ignores SIGTERM: see collect_in_process
            self.process.kill()
            self.process.join()
        self.weights.close()
        self.rollouts.close()


class OverlappedRolloutDataset(IterableDataset):
    """The learner's side of ``data.overlap``: yields the collector's rollouts, one per iteration, as
    :class:`lit_ppo.collection.datasets.RolloutDataset` does in-process (same :class:`lit_ppo.collection.rollout.Rollout`, same
    checkpoint role), with ``time/rollout_wait_ms`` (how long the learner waited for the rollout) beside the
    collector's phases and its ``time/weights_wait_ms`` (how long the collector waited for the weights).

    Args:
        recipe: what the collector builds (:class:`lit_ppo.collection.recipe.RolloutRecipe`).
        policy: the learner's policy, whose weights are sent once per rollout.
        first_failure: as for :class:`lit_ppo.collection.datasets.RolloutDataset`, with several processes.
    """

    def __init__(self, recipe, policy: ActorCritic,
                 first_failure: Optional[Callable[[Optional[str]], Optional[str]]] = None) -> None:
        self.recipe, self.policy, self.first_failure = recipe, policy, first_failure
        self.collector: Optional[CollectorProcess] = None
        self.resume = ResumePoint()  # where the collector starts (a checkpoint's state, or fresh)
        self.clock = PhaseClock("rollout_wait_ms")  # the learner's side: waiting for each rollout
        self.boundary: Optional[bytes] = None  # the collector's state at the end of the latest rollout, pickled
        self.behaviour: Optional[dict[str, torch.Tensor]] = None  # the weights that collect the next rollout

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[Rollout]:
        weights = snapshot(self.policy)
        if self.collector is None:
            self._start(weights)
        # Version j goes out before rollout j is awaited: the collector collects rollout j + 1 with it meanwhile.
        self.collector.send(weights)
        with self.clock.phase("rollout_wait_ms"):
            message = self.collector.receive()
        failure = message.error if isinstance(message, CollectorFailed) else None
        if failure is not None and not isinstance(failure, EnvStepError):
            raise failure
        raise_first_failure(failure, self.first_failure)
        self.boundary = message.state  # stays pickled until a checkpoint asks for it
        self.behaviour, self.resume = weights, ResumePoint()
        if message.note:
            rank_zero_warn(f"lit_ppo: resuming inexactly: {message.note}")
        yield message.rollout(self.collector.rollout_slots, **self.clock.lap())

    def _start(self, weights: dict[str, torch.Tensor]) -> None:
        behaviour = weights
        if self.resume.behaviour is not None:
            behaviour = self.resume.behaviour  # the weights the checkpoint's next rollout is collected with
        self.collector = CollectorProcess(self.recipe, cpu_copy(self.policy, None), behaviour, self.resume)

    # -- checkpointing (at rollout boundaries) and shutdown ---------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        if self.boundary is None:  # nothing collected since a resume: what it resumed from still holds
            return self.resume.state()
        return ResumePoint(pickle.loads(self.boundary), self.behaviour).state()

    def load_state_dict(self, state: dict[str, Any]) -> Optional[str]:
        """Taken by the collector when it starts; a note on an inexact resume comes with its first rollout."""
        self.resume = ResumePoint.from_state(state)
        return None

    def restart_at(self, iterations: int, env_steps: Optional[int] = None) -> None:
        self.resume = ResumePoint(iterations=iterations, env_steps=env_steps)

    def close(self) -> None:
        if self.collector is not None:
            self.collector.close()
            self.collector = None
