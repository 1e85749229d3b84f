"""Parameter fingerprints of short seeded fits: the check that a refactor changed no behaviour.

    python benchmarks/fingerprint.py [--out FILE]

For each case (a shipped config's model and data settings, a few rollouts, seed 1, one torch thread), fit in this
process through the public API (``lit_ppo.PPODataModule``, ``lit_ppo.PPOModule``, a plain ``Trainer``) and print
the sha256 of the trained parameters and buffers (normalization statistics included) and the last logged return.
Run it before and after a change on the same machine: equal hashes mean bit-identical training. The cases cover
a discrete and a continuous policy, a recurrent core, and the overlapped collector. Hashes differ across CPUs and
library versions; compare runs made on one machine.
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import lightning as L
import torch
import yaml

import lit_ppo

CONFIGS = Path(__file__).resolve().parent.parent / "lit_ppo" / "configs"
# (name, config, rollouts, extra data settings)
CASES = (
    ("cartpole", "cartpole.yaml", 4, {}),
    ("pendulum", "pendulum.yaml", 3, {}),
    ("recurrent", "cartpole_pomdp.yaml", 3, {}),
    ("cartpole_overlap", "cartpole.yaml", 4, {"overlap": True}),
)


def fingerprint(config: str, rollouts: int, extra: dict) -> dict:
    settings = yaml.safe_load((CONFIGS / config).read_text())
    data_kwargs = dict(settings["data"], **extra)
    data_kwargs["total_timesteps"] = rollouts * data_kwargs["num_envs"] * data_kwargs["num_steps"]
    L.seed_everything(1, verbose=False)
    torch.set_num_threads(1)
    data = lit_ppo.PPODataModule(**data_kwargs)
    model = lit_ppo.PPOModule(env_spec=data.env_spec, **settings["model"])
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(model, data)
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return {"sha256": digest.hexdigest()[:16], "env_steps": int(model.env_steps),
            "return_mean": float(model.rollout_metrics.get("rollout/return_mean", float("nan")))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the fingerprints to this JSON file")
    args = parser.parse_args()
    results = {}
    for name, config, rollouts, extra in CASES:
        results[name] = fingerprint(config, rollouts, extra)
        print(name, json.dumps(results[name]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
