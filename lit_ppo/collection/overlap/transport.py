"""How weights and rollouts cross between the learner and a ``data.overlap`` collector process.

A tensor put on a ``torch.multiprocessing`` queue is moved into a new shared-memory segment whose file descriptor is
handed over through a socket: per tensor, per message. A rollout is ~15 tensors, the collector's state ~8 more and
the weights ~12. Sent that way, the overlapped run at RL-Zoo's CartPole settings (8 envs x 32 steps, 20 updates a
rollout) was slower than the synchronous one: ``python benchmarks/compare.py --settings zoo --arms lit_ppo
lit_overlap --seeds 1 2 3`` gave 0.82x the synchronous SPS (iteration 61.9 against 50.9 ms; 2-core AMD EPYC,
2026-12-02). With this unit, the tensors of fixed shape live in :class:`SharedTensors`, allocated and handed over
once, and a queue carries per rollout a version number one way and a small message of plain values the other:
0.91x by the same command (the collector's start-up of ~3 s inside a 20 s fit included), and 1.28x by median
iteration (``python -m lit_ppo profile --config cartpole.yaml --iterations 40``: 31.2 against 40.0 ms).
"""

import dataclasses
from typing import Any, NamedTuple, Optional, Union

import numpy as np
import torch
from torch import Tensor

from lit_ppo.collection.rollout import VARIABLE, Rollout, fields_with_role

# Rollout tensors whose length varies from rollout to rollout: sent in the message, as numpy arrays (pickled plainly).
VARIABLE_FIELDS = fields_with_role(VARIABLE)


class SharedTensors:
    """Two alternating sets of shared-memory tensors shaped like ``template``: version ``v`` is written to and read
    from set ``v % 2``. The handshakes of :mod:`lit_ppo.collection.overlap.dataset` guarantee that a set is read before it is written
    again (version ``v + 2`` is written only after the reader has answered version ``v + 1``). Pickled to a spawned
    process (as a ``Process`` argument or once on a queue), the tensors arrive as the same shared memory."""

    def __init__(self, template: dict[str, Tensor]) -> None:
        self.sets = [{name: torch.empty_like(value, device="cpu").share_memory_() for name, value in template.items()}
                     for _ in range(2)]

    def write(self, version: int, tensors: dict[str, Tensor]) -> None:
        for name, target in self.sets[version % 2].items():
            target.copy_(tensors[name])

    def read(self, version: int) -> dict[str, Tensor]:
        """Copies of version ``version``'s tensors, which the reader owns."""
        return {name: value.clone() for name, value in self.sets[version % 2].items()}

    def view(self, version: int) -> dict[str, Tensor]:
        """Version ``version``'s tensors themselves (for a reader that copies them on, as ``load_state_dict`` does)."""
        return self.sets[version % 2]


def split_rollout(rollout: Rollout) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """``(fixed-shape tensors, everything else as plain values)``: the first for :class:`SharedTensors`, the second
    for the message."""
    tensors, rest = {}, {}
    for field in dataclasses.fields(rollout):
        value = getattr(rollout, field.name)
        if isinstance(value, Tensor) and field.name not in VARIABLE_FIELDS:
            tensors[field.name] = value
        else:
            rest[field.name] = value.numpy() if isinstance(value, Tensor) else value
    return tensors, rest


def join_rollout(tensors: dict[str, Tensor], rest: dict[str, Any]) -> Rollout:
    """The :class:`Rollout` that :func:`split_rollout` took apart."""
    return Rollout(**tensors, **{name: torch.from_numpy(value) if isinstance(value, np.ndarray) else value
                                 for name, value in rest.items()})


# -- the messages, collector -> learner (a queue; the learner -> collector direction carries only version numbers) --
class RolloutReady(NamedTuple):
    """Rollout ``number`` is in the collector's rollout slots (:class:`SharedTensors`, set ``number % 2``)."""

    number: int
    rest: dict[str, Any]  # the rollout's other fields, plain values (split_rollout)
    state: bytes  # the collector's state at the rollout's end (the next one's start), pickled: a checkpoint's part
    note: Optional[str]  # why a resume was inexact, with the first rollout after it
    slots: Optional["SharedTensors"]  # the rollout slots, with the first rollout only

    def rollout(self, slots: "SharedTensors", **learner_timings: float) -> Rollout:
        """The rollout copied out of ``slots``, with the learner's own phases beside the collector's."""
        rollout = join_rollout(slots.read(self.number), self.rest)
        return dataclasses.replace(rollout, timings={**rollout.timings, **learner_timings})


class CollectorFailed(NamedTuple):
    """The collector raised ``error`` (or ended without a rollout); the learner raises it."""

    error: Exception


Message = Union[RolloutReady, CollectorFailed]


@dataclasses.dataclass
class ResumePoint:
    """Where a collector process starts: a checkpoint's collector state and the weights that collect its next rollout,
    or (a rank the checkpoint did not have) only how many rollouts and environment steps of all ranks were done;
    empty for a fresh start. A checkpoint holds it as a plain dict (:meth:`state`), so that checkpoints stay loadable
    without this class."""

    collector: Optional[dict[str, Any]] = None
    behaviour: Optional[dict[str, Tensor]] = None
    iterations: Optional[int] = None
    env_steps: Optional[int] = None

    @classmethod
    def from_state(cls, state: Optional[dict[str, Any]]) -> "ResumePoint":
        state = state or {}
        return cls(state.get("collector"), state.get("behaviour"), state.get("iterations"), state.get("env_steps"))

    def state(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}
