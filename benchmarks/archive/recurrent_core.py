"""Archived study.

Measured 2026-12-01 on a shared 2-core Intel Xeon (docs/performance.md, committed at 956c320); last changed at
0f23b27 (2026-12-04: import path after the layout move).
Question: is the update's sequence pass faster as padded episode pieces in one cell call than as one call per
segment between start steps? Answer: yes, 6.27 against 17.42 ms (2.78x) with starts on 14 of 32 steps, 4.04
against 6.58 ms (1.63x) with 3.
Not maintained or tested: it may need commit 0f23b27 to run (``git worktree add DIR 0f23b27``).

The recurrent core's sequence pass (the update's), forward and backward: lit_ppo's padded episode pieces in one
cell call (``lit_ppo.networks.recurrent.RecurrentCore``) against one cell call per segment between start steps, on the same
inputs; medians of ``--repeats`` runs, one torch thread.

    python benchmarks/archive/recurrent_core.py                       # 8 envs x 32 steps, LSTM 128, starts with p=0.06
    python benchmarks/archive/recurrent_core.py --start-probability 0.01
"""

import argparse
import statistics
import time

import torch

from lit_ppo.networks.recurrent import RecurrentConfig, RecurrentCore


def per_segment(core: RecurrentCore, x: torch.Tensor, state: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """The alternative: cut the sequence at every step where any env starts, one cell call per segment."""
    bounds = sorted({0, *torch.nonzero(starts.any(1)).flatten().tolist(), x.shape[0]})
    outputs = []
    for begin, end in zip(bounds[:-1], bounds[1:]):
        state = state * (~starts[begin]).unsqueeze(1).to(state.dtype)
        out, hidden = core.cell(x[begin:end], core._unpack(state))
        outputs.append(out)
        state = core._pack(hidden)
    return torch.cat(outputs)


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats + 3):
        start = time.perf_counter()
        fn().sum().backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times[3:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--start-probability", type=float, default=0.06)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    core = RecurrentCore(2, RecurrentConfig("lstm", args.hidden))
    x = torch.randn(args.steps, args.envs, 2)
    state = torch.randn(args.envs, core.state_size)
    starts = torch.rand(args.steps, args.envs) < args.start_probability
    torch.testing.assert_close(core(x, state, starts)[0], per_segment(core, x, state, starts))
    pieces = timed(lambda: core(x, state, starts)[0], args.repeats)
    segments = timed(lambda: per_segment(core, x, state, starts), args.repeats)
    print(f"{args.envs} envs x {args.steps} steps, LSTM {args.hidden}, {int(starts.sum())} starts on "
          f"{int(starts.any(1).sum())} distinct steps: pieces {pieces * 1e3:.2f} ms, per segment {segments * 1e3:.2f} ms "
          f"(forward + backward, medians of {args.repeats}); pieces are {segments / pieces:.2f}x faster")


if __name__ == "__main__":
    main()
