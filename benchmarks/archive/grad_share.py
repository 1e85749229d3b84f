"""How much of each clipped update is the policy's: the actor's and the critic's gradient norms before
``model.max_grad_norm`` clips their joint norm, for a config's first steps (issue 43, Swimmer: with gamma 0.9999 and
unscaled returns the critic's gradient is large, so a joint clip at 0.5 shrinks the policy's step with it).

    python benchmarks/archive/grad_share.py --config swimmer.yaml [--set data.return_scaling=true] --steps 150000

Trains in this process through ``python -m lit_ppo fit`` with a callback that records, at every optimizer step
before the clip, the norm of the actor's gradients (``actor.*`` and ``log_std``), the critic's, and of both; prints
their medians per quarter of the run, the median norm of the actor's step after the clip (``actor x min(1, c /
total)``) and the median explained variance of the rollouts' values (how well the acting critic predicted the
returns).
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import lightning as L
import torch

OUT = Path(tempfile.gettempdir()) / "grad_share.json"


class GradNorms(L.Callback):
    """The actor's, the critic's and the joint gradient norm at each optimizer step, before the module clips them
    (Lightning runs a callback's ``on_before_optimizer_step`` before the module's own, where lit_ppo clips)."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, float, float]] = []
        self.explained: list[float] = []  # per rollout: how well the acting critic predicted its returns

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.explained.append(float(batch.explained_variance))

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        actor, critic = [], []
        for name, p in pl_module.policy.named_parameters():
            if p.grad is not None:
                (critic if name.startswith("critic") else actor).append(p.grad.detach().norm() ** 2)
        a, c = float(sum(actor) ** 0.5), float(sum(critic) ** 0.5)
        self.rows.append((a, c, (a * a + c * c) ** 0.5))

    def on_train_end(self, trainer, pl_module) -> None:
        OUT.write_text(json.dumps({"rows": self.rows, "explained": self.explained,
                                   "max_grad_norm": pl_module.ppo.max_grad_norm}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", nargs="*", default=[], help="overrides KEY=VALUE")
    parser.add_argument("--steps", type=int, default=150_000)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    from lit_ppo.cli import main as lit_main

    sys.path.insert(0, str(Path(__file__).parent))
    overrides = [f"--{kv.split('=', 1)[0]}={kv.split('=', 1)[1]}" for kv in args.set]
    with tempfile.TemporaryDirectory() as work:
        import os
        os.chdir(work)
        try:
            lit_main(["fit", "--config", args.config, "--seed_everything", str(args.seed), "--data.total_timesteps",
                      str(args.steps), "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
                      "--trainer.check_val_every_n_epoch", "100000", "--trainer.callbacks+=grad_share.GradNorms",
                      *overrides])
        except SystemExit as err:
            if err.code:
                raise
    result = json.loads(OUT.read_text())
    rows, explained, clip = result["rows"], result["explained"], result["max_grad_norm"]
    quarter, per_rollout = max(1, len(rows) // 4), len(rows) // max(1, len(explained))
    print(f"{args.config} {' '.join(args.set)}: {len(rows)} optimizer steps, clip {clip}")
    print("| optimizer steps | actor norm | critic norm | joint norm | actor's step after the clip | explained variance |")
    print("|---|---|---|---|---|---|")
    for q in range(4):
        part = rows[q * quarter:(q + 1) * quarter]
        if not part:
            continue
        med = [statistics.median(r[i] for r in part) for i in range(3)]
        after = statistics.median(a * min(1.0, clip / t) if clip and t > 0 else a for a, _, t in part)
        ev = explained[q * quarter // per_rollout:(q + 1) * quarter // per_rollout] or [float("nan")]
        print(f"| {q * quarter}-{(q + 1) * quarter} | {med[0]:.3g} | {med[1]:.3g} | {med[2]:.3g} | {after:.3g} | "
              f"{statistics.median(ev):.3g} |")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
