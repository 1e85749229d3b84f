"""``python -m lit_ppo tune --config C --trials N [options] [fit overrides ...]``: an Optuna study of PPO settings.

Each trial is a ``fit`` of the config (with any fit overrides given after the options) with hyperparameters drawn
from the search space below, evaluated every ``--eval-every`` iterations (``data.eval_episodes`` deterministic
episodes); a trial whose evaluations fall behind the other trials' at the same env steps is pruned (Optuna's
median pruner, fed by :class:`TrialPruning`, a Lightning callback). A trial's value is its last evaluation.
The study lives in ``--storage`` (SQLite by default), so an interrupted ``tune`` resumes where it stopped, and
several ``tune`` processes on one storage run trials in parallel. At the end the best trial is written as a
config (``--out``) that runs as it is: ``python -m lit_ppo fit --config best.yaml``.

Search space (:func:`sample_settings`; RL-Zoo's ``hyperparams_opt.py`` is the model):

- ``model.lr``: log-uniform 1e-5 .. 1e-2;  ``model.clip_coef``: 0.1, 0.2, 0.3;  ``model.ent_coef``: log-uniform
  1e-8 .. 0.1;  ``model.hidden_sizes``: two layers of 64, 128 or 256;
- ``data.num_steps``: 16 .. 512 (powers of 2);  minibatches per epoch: 1, 2, 4, 8 (``data.minibatch_size``;
  with ``model.recurrent``, where a minibatch is whole environment sequences, only those that divide
  ``data.num_envs``);
  ``data.update_epochs``: 1 .. 20;  ``data.gamma``: 0.9 .. 0.999;  ``data.gae_lambda``: 0.8 .. 1.0.

Needs ``pip install "lit_ppo[tune]"`` (Optuna).
"""

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

import lightning as L
import yaml

from lit_ppo.errors import ConfigError, require
from lit_ppo.tools.outputs import check_output, replacing

NUM_STEPS = [16, 32, 64, 128, 256, 512]
MINIBATCHES = [1, 2, 4, 8]
GAMMAS = [0.9, 0.95, 0.98, 0.99, 0.995, 0.999]
LAMBDAS = [0.8, 0.9, 0.92, 0.95, 0.98, 0.99, 1.0]
WIDTHS = [64, 128, 256]


def minibatch_counts(num_envs: int, recurrent: bool) -> list[int]:
    """The minibatches per epoch a trial may draw: a recurrent policy's minibatches are whole environment
    sequences, so their number must divide ``num_envs`` (any other count would fail the trial's fit)."""
    return [m for m in MINIBATCHES if not recurrent or num_envs % m == 0]  # 1 always divides


def sample_settings(trial, num_envs: int, recurrent: bool = False) -> dict[str, dict[str, Any]]:
    """One trial's settings, as ``{"model": {...}, "data": {...}}`` config entries."""
    num_steps = trial.suggest_categorical("num_steps", NUM_STEPS)
    minibatches = trial.suggest_categorical("minibatches", minibatch_counts(num_envs, recurrent))
    width = trial.suggest_categorical("width", WIDTHS)
    model = {"lr": trial.suggest_float("lr", 1e-5, 1e-2, log=True),
             "clip_coef": trial.suggest_categorical("clip_coef", [0.1, 0.2, 0.3]),
             "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.1, log=True),
             "hidden_sizes": [width, width]}
    data = {"num_steps": num_steps, "minibatch_size": num_envs * num_steps // minibatches,
            "update_epochs": trial.suggest_int("update_epochs", 1, 20),
            "gamma": trial.suggest_categorical("gamma", GAMMAS),
            "gae_lambda": trial.suggest_categorical("gae_lambda", LAMBDAS)}
    return {"model": model, "data": data}



class TrialPruning(L.Callback):
    """Reports each evaluation (``eval/return_mean`` at the env steps so far) to the Optuna trial and, when the
    pruner says so, stops the fit at the end of that iteration (``trainer.should_stop``); the caller then marks the
    trial pruned."""

    def __init__(self, trial, monitor: str = "eval/return_mean") -> None:
        self.trial, self.monitor, self.pruned = trial, monitor, False
        self.last: Optional[float] = None  # the latest evaluation return

    def on_validation_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        self.last = float(trainer.callback_metrics[self.monitor])
        self.trial.report(self.last, step=int(getattr(pl_module, "env_steps", trainer.global_step)))
        if self.trial.should_prune():
            self.pruned = True
            trainer.should_stop = True


def flag(settings: dict[str, dict[str, Any]]) -> list[str]:
    """The settings as fit overrides (``--model.lr 0.001 ...``)."""
    return [arg for section, values in settings.items() for key, value in values.items()
            for arg in (f"--{section}.{key}", json.dumps(value))]  # JSON is YAML: numbers and lists as they are


def run_trial(trial, config: str, overrides: list[str], num_envs: int, eval_every: int, trial_dir: Path,
              recurrent: bool = False) -> float:
    """One fit with the trial's settings; its last evaluation return (Optuna's ``TrialPruned`` when pruned)."""
    import optuna

    from lit_ppo.cli import instantiate

    settings = sample_settings(trial, num_envs, recurrent)
    trial.set_user_attr("settings", settings)
    cli = instantiate(["--config", config, *overrides, *flag(settings), "--trainer.logger", "false",
                       "--trainer.enable_checkpointing", "false", "--trainer.callbacks", "[]",
                       "--trainer.check_val_every_n_epoch", str(eval_every),
                       "--trainer.default_root_dir", str(trial_dir)])
    pruning = TrialPruning(trial)
    cli.trainer.callbacks.append(pruning)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    if pruning.pruned:
        raise optuna.TrialPruned(f"evaluation return {pruning.last:.1f} at iteration {cli.trainer.current_epoch}")
    if pruning.last is None or cli.trainer.current_epoch % eval_every:  # the budget's last iterations unevaluated
        [result] = cli.trainer.validate(cli.model, datamodule=cli.datamodule, verbose=False)
        pruning.last = float(result["eval/return_mean"])
    if not math.isfinite(pruning.last):
        raise optuna.TrialPruned("non-finite evaluation return")
    return pruning.last


def write_best(study, config: str, out: Path, overrides: list[str]) -> None:
    from lit_ppo.cli import shipped_config

    base = yaml.safe_load(Path(shipped_config(config)).read_text()) or {}
    best = study.best_trial
    for section, values in best.user_attrs["settings"].items():
        base.setdefault(section, {}).update(values)
    header = (f"# lit_ppo tune: study {study.study_name!r}, best of {len(study.trials)} trials: trial "
              f"{best.number}, last evaluation return {best.value:.2f}.\n# Base config: {config}; the tuned "
              f"settings replace its model.* and data.* entries (trials ran with: {' '.join(overrides) or 'no overrides'})."
              f"\n# Run: python -m lit_ppo fit --config {out}\n")
    text = header + yaml.safe_dump(base, sort_keys=False)
    try:
        with replacing(out, "--out") as written:
            written.write_text(text)
    except ConfigError:
        print(text)  # the trials' result is not lost: it is on stdout (the error follows)
        raise


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lit_ppo tune", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the config to tune (a shipped name or a file)")
    parser.add_argument("--trials", type=int, required=True, help="trials the study should have finished in all")
    parser.add_argument("--storage", default="sqlite:///tune.db", help="Optuna storage URL (default: ./tune.db)")
    parser.add_argument("--study-name", help="default: the config's file name without .yaml")
    parser.add_argument("--eval-every", type=int, default=10, help="iterations between evaluations (pruning)")
    parser.add_argument("--out", type=Path, help="the best trial's config (default: <study-name>_best.yaml)")
    parser.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    args, overrides = parser.parse_known_args(argv)
    name = args.study_name or Path(args.config).stem
    out = args.out or Path(f"{name}_best.yaml")
    try:  # what cannot work is said before any trial runs: the best config would otherwise be lost after them
        require(args.trials >= 1, "--trials",
                f"must be at least 1 (the trials the study should have), got {args.trials}.")
        require(args.eval_every >= 1, "--eval-every",
                f"must be at least 1 (iterations between a trial's evaluations), got {args.eval_every}.")
        from lit_ppo.cli import shipped_config

        check_output(out, "--out", [Path(shipped_config(args.config))])
    except ConfigError as err:
        print(f"lit_ppo tune: error: {err}", file=sys.stderr)
        return 2
    try:
        import optuna
    except ImportError:
        print("lit_ppo tune: error: needs Optuna: pip install 'lit_ppo[tune]'", file=sys.stderr)
        return 2
    from lit_ppo.cli import instantiate

    try:  # the config and overrides as given, checked before any trial
        base = instantiate(["--config", args.config, *overrides])
        num_envs, recurrent = base.datamodule.hparams.num_envs, base.model.hparams.recurrent is not None
    except ConfigError as err:
        print(f"lit_ppo tune: error: {err}", file=sys.stderr)
        return 2
    try:
        study = optuna.create_study(study_name=name, storage=args.storage, load_if_exists=True, direction="maximize",
                                    sampler=optuna.samplers.TPESampler(seed=args.seed),
                                    pruner=optuna.pruners.MedianPruner(n_startup_trials=2))
    except Exception as err:  # optuna's and sqlalchemy's errors for a URL or database they cannot use
        print(f"lit_ppo tune: error: --storage: {args.storage!r} cannot hold the study ({type(err).__name__}: "
              f"{str(err).splitlines()[0][:200]}); give an Optuna storage URL such as sqlite:///tune.db (a file "
              "in a writable directory).", file=sys.stderr)
        return 2
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    done = len(study.get_trials(states=finished))
    print(f"lit_ppo tune: study {name!r} in {args.storage}: {done} of {args.trials} trials finished")

    def objective(trial) -> float:
        return run_trial(trial, args.config, overrides, num_envs, args.eval_every, Path(f"{name}_trials/{trial.number}"),
                         recurrent)

    def say(study, trial) -> None:
        best = (f"best {study.best_value:.2f} (trial {study.best_trial.number})"
                if study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)) else "no trial completed yet")
        value = f"{trial.value:.2f}" if trial.value is not None else trial.state.name.lower()
        print(f"lit_ppo tune: trial {trial.number}: {value}; {len(study.get_trials(states=finished))} of "
              f"{args.trials} finished; {best}", flush=True)

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # one line per trial, ours
    try:
        study.optimize(objective, n_trials=max(args.trials - done, 0), callbacks=[say], catch=(ConfigError,))
    except ConfigError as err:
        print(f"lit_ppo tune: error: {err}", file=sys.stderr)
        return 2
    if not study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        print("lit_ppo tune: error: no trial completed (all pruned or failed); run more trials", file=sys.stderr)
        return 2
    try:
        write_best(study, args.config, out, overrides)
    except ConfigError as err:
        print(f"lit_ppo tune: error: {err}", file=sys.stderr)
        return 2
    print(f"lit_ppo tune: best trial {study.best_trial.number}: {study.best_value:.2f}; wrote {out}")
    return 0
