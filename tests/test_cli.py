"""The CLI end to end as a user runs it (from a directory without the repo's configs): in fresh processes where the
process matters, in this one for parsing and short fits."""

import csv

import torch

SMALL = ["--data.total_timesteps", "2560", "--trainer.enable_progress_bar", "false"]
METRICS = ["losses/policy", "losses/value", "losses/entropy", "stats/approx_kl", "stats/clip_fraction",
           "stats/explained_variance", "rollout/return_mean", "rollout/length_mean", "time/sps", "time/env_steps"]


def test_fit_with_overrides_and_csv_logger_then_validate(cli, tmp_path):
    fit = cli("fit", "--config", "cartpole.yaml", *SMALL, "--model.lr", "3e-4", "--seed_everything", "4",
        "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "logs",
        cwd=tmp_path)
    [metrics_file] = list(tmp_path.glob("logs/*/version_*/metrics.csv"))
    rows = list(csv.DictReader(metrics_file.open()))
    for name in METRICS:
        assert name in rows[0], name
    logged = [r for r in rows if r["time/env_steps"]]
    assert len(logged) == 10  # 2560 steps / (8 envs x 32 steps) rollouts, logged once each
    assert float(logged[-1]["time/env_steps"]) == 2560
    assert float(logged[-1]["time/sps"]) > 0
    assert all(float(r["rollout/return_mean"]) > 0 for r in logged)
    ckpt = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    state = torch.load(ckpt, weights_only=True)
    assert state["hyper_parameters"]["lr"] == 3e-4
    assert state["global_step"] == 10 * 20  # 10 rollouts x 20 update epochs x 1 minibatch

    proc = cli("validate", "--config", "cartpole.yaml", "--ckpt_path", ckpt, "--trainer.logger", "false",
               "--trainer.default_root_dir", "elsewhere", cwd=tmp_path)
    assert "eval/return_mean" in proc.stdout and "eval/return_std" in proc.stdout
    for output in (fit.stderr, proc.stderr):  # Lightning's deprecation noise is not the user's to act on
        assert "LeafSpec" not in output and "dirpath has changed" not in output


def test_print_config_round_trips(cli_in_process, tmp_path):
    printed = cli_in_process("fit", "--config", "cartpole.yaml", "--model.ent_coef", "0.02", "--print_config",
                             cwd=tmp_path).stdout
    (tmp_path / "printed.yaml").write_text(printed)
    assert "env_spec" not in printed  # derived from the environment, never repeated in a config
    again = cli_in_process("fit", "--config", "printed.yaml", "--print_config", cwd=tmp_path).stdout
    assert again == printed
    proc = cli_in_process("fit", "--config", "printed.yaml", *SMALL, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runs/cartpole/checkpoints/last.ckpt").exists()


def test_shipped_configs_resolve_from_any_directory(cli_in_process, tmp_path):
    assert not (tmp_path / "cartpole.yaml").exists()
    out = cli_in_process("fit", "--config", "cartpole.yaml", "--print_config", cwd=tmp_path).stdout
    assert "CartPole-v1" in out


def test_cartpole_fast_stops_once_an_evaluation_solves_it(cli, tmp_path):
    # configs/cartpole_fast.yaml: evaluation every 5 rollouts, EarlyStopping at a 20-episode mean of 475.
    # Seeds 1-10 solved it within 41k of its 100k-step budget here.
    cli("fit", "--config", "cartpole_fast.yaml", "--seed_everything", "3", "--trainer.enable_progress_bar", "false",
        cwd=tmp_path)
    [metrics_file] = list(tmp_path.glob("runs/cartpole_fast/version_*/metrics.csv"))
    rows = list(csv.DictReader(metrics_file.open()))
    evals = [float(r["eval/return_mean"]) for r in rows if r.get("eval/return_mean")]
    steps = [float(r["time/env_steps"]) for r in rows if r.get("time/env_steps")]
    assert evals[-1] >= 475 and all(e < 475 for e in evals[:-1])
    assert steps[-1] < 100_000  # stopped early, at the solving evaluation
    assert (tmp_path / "runs/cartpole_fast/checkpoints/last.ckpt").exists()


def test_help_and_a_misspelt_subcommand_list_every_subcommand(cli_in_process, tmp_path):
    # `fit ...` builds only fit's parser (start-up); everything else still sees all four subcommands.
    out = cli_in_process("--help", cwd=tmp_path).stdout
    for subcommand in ("fit", "validate", "test", "predict"):
        assert subcommand in out, subcommand
    assert "--trainer.gradient_clip_val" in cli_in_process("fit", "--help", cwd=tmp_path).stdout
    proc = cli_in_process("fitt", "--config", "cartpole.yaml", cwd=tmp_path)
    assert proc.returncode != 0 and "fitt" in proc.stderr and "validate" in proc.stderr, proc.stderr[-2000:]


def test_a_fit_without_a_config_evaluates_every_50_iterations_and_keeps_last_ckpt(cli_in_process, tmp_path):
    # no config; small, cheap rollouts (4 envs x 128 steps, one update each): the cadence counts iterations
    small = ["--data.num_steps", "128", "--data.update_epochs", "1", "--data.minibatch_size", "512"]
    proc = cli_in_process("fit", *small, "--data.total_timesteps", str(60 * 512), "--data.eval_episodes", "4",
                          "--trainer.enable_progress_bar", "false", "--trainer.logger",
                          "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "logs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [metrics_file] = list(tmp_path.glob("logs/*/version_*/metrics.csv"))
    rows = list(csv.DictReader(metrics_file.open()))
    # one evaluation, after rollout 50 (not after each)
    assert [int(r["step"]) for r in rows if r.get("eval/return_mean")] == [50 * 512]
    state = torch.load(tmp_path / "checkpoints/last.ckpt", weights_only=False)
    assert state["lit_ppo_env_steps"] == 60 * 512  # written at the end, where `--ckpt_path last` finds it
    proc = cli_in_process("fit", *small, "--data.total_timesteps", str(70 * 512), "--ckpt_path", "last",
                          "--trainer.enable_progress_bar", "false", "--trainer.logger", "false", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert torch.load(tmp_path / "checkpoints/last.ckpt", weights_only=False)["lit_ppo_env_steps"] == 70 * 512


def test_the_mujoco_recipe_is_one_recipe():
    # halfcheetah.yaml, walker2d.yaml, humanoid.yaml and ant.yaml share every model and data setting but the
    # environment, except the overrides named here (each explained in its config's header): a per-env difference must
    # be added here by name, never drift in unnoticed. Ant keeps the recipe's first version (docs/results.md).
    import yaml

    from lit_ppo.cli import shipped_config

    per_env = {"env_id", "env_kwargs"}
    first_version = {"model": {"vf_coef": 0.25},
                     "data": {"num_envs": 8, "num_steps": 256, "normalize_reward": True, "return_scaling": False,
                              "recompute_advantages": False}}
    overrides = {"halfcheetah.yaml": {}, "walker2d.yaml": {}, "humanoid.yaml": {}, "ant.yaml": first_version}
    off_by_default = {"return_scaling": False, "recompute_advantages": False}
    configs = {name: yaml.safe_load(open(shipped_config(name))) for name in overrides}
    reference = configs["halfcheetah.yaml"]
    assert reference["data"]["return_scaling"] and reference["data"]["recompute_advantages"]
    for name, config in configs.items():
        expected = {part: {**off_by_default, **reference[part], **overrides[name].get(part, {})} if part == "data"
                    else {**reference[part], **overrides[name].get(part, {})} for part in ("model", "data")}
        assert config["model"] == expected["model"], name
        data = {**off_by_default, **config["data"]}
        assert {k: v for k, v in data.items() if k not in per_env} == \
            {k: v for k, v in expected["data"].items() if k not in per_env}, name
    assert configs["ant.yaml"]["data"]["env_kwargs"] == {"include_cfrc_ext_in_observation": False}
