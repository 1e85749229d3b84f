"""Which package defaults serve an untuned environment best: lit_ppo without a config (``fit --data.env_id X``, the
defaults alone, or with a candidate set of defaults given as overrides) beside Stable-Baselines3's ``PPO`` with its
own defaults, on several environments, one process at a time. Each run's final policy is evaluated on 20
deterministic episodes of fresh environments; results are appended to ``--out`` (JSON lines) and a finished
(arm, env, seed) is skipped, so an interrupted study resumes. Prints the table of
:func:`markdown` (``--report``: that table alone, nothing run).

    python benchmarks/defaults.py [--envs LunarLanderContinuous-v3:1000000 ...] --seeds 1 2 3 [--arms ...]
    python benchmarks/defaults.py --envs ... --seeds 1 2 3 --arms lit_defaults sb3 --report   # the docs' table

Arms: ``lit_defaults`` (the package as it is), ``lit_defaults_1203`` (the defaults from 2026-12-03 to 2026-12-06,
rewards scaled, a bonus of 0.01 for Box actions, no KL stop: the base of every arm below that changes "the defaults",
so that it measures what its rows measured), ``lit_cleanrl`` (the package defaults before 82ebf41: CleanRL's CartPole
settings), ``lit_sb3like`` (SB3's defaults on lit_ppo with 4 envs: 4 x 512 steps, minibatches of 64, 10 epochs, lr 3e-4
constant, no entropy bonus, no normalization), ``lit_sb3`` (the same with SB3's value-loss weight, ``vf_coef`` 1.0),
``lit_sb3like_1env`` (``lit_sb3like`` on SB3's one env x 2,048 steps), ``lit_sb3_1env`` (``lit_sb3`` on SB3's one env:
SB3's settings exactly), ``lit_1env`` / ``lit_no_obs_norm`` /
``lit_no_reward_norm`` / ``lit_vf1`` (the package defaults with one of their differences from SB3's undone: one env x
2,048 steps, no observation normalization, no reward scaling, SB3's value-loss weight), ``lit_anneal`` (the defaults
with the learning rate annealed to 0, a candidate fix), ``lit_overlap`` (the defaults with ``data.overlap``: learning
must not change beyond noise), ``lit_overlap_decoupled`` (the same with ``model.decoupled``: clipped around the
learner's policy), ``lit_ent01`` (the defaults with an entropy bonus of 0.01, RL-Zoo's tuned LunarLanderContinuous value
and CleanRL's `ppo.py` default: the continuous-action default since 2026-12-03), ``lit_ent0`` (no entropy bonus: the
defaults before 2026-12-03; ``lit_defaults`` rows of continuous tasks measured before then are these),
``lit_ent0_no_obs_norm`` / ``lit_ent0_no_reward_norm`` / ``lit_ent0_1env`` (``lit_ent0`` with one more difference from
SB3's undone: where Ant-v5 loses to SB3's defaults), ``lit_no_cfrc`` (the defaults without Ant-v5's or Humanoid-v5's
contact forces in the observation: a diagnosis), ``lit_std05`` / ``lit_ent0_std05`` (the defaults with a first std of
exp(-0.5), with and without the bonus: candidates for Ant-v5), ``lit_std1`` (a first std of exp(-1)), ``lit_ent0_vf1`` /
``lit_ent0_std05_vf1`` / ``lit_sb3_rs`` (SB3's value weight with the normalizations, with a first std of exp(-0.5) too,
and SB3's settings with reward scaling), ``lit_ent0_anneal`` / ``lit_tkl`` / ``lit_ent0_tkl`` (the learning rate
annealed without the bonus; SB3's KL early stop at 0.02, with and without the bonus),
``lit_ent0_tkl05`` / ``lit_ent0_tkl01`` / ``lit_ent0_tkl_lr1e4`` / ``lit_ent0_tkl_no_rs`` (``lit_ent0_tkl`` with a stop
at 0.05 or 0.01, lr 1e-4, or no reward scaling: for HalfCheetah-v5), ``lit_ent0_tkl_rets`` (the critic's
targets scaled by the returns' std instead of the rewards: the defaults since 2026-12-06),
``lit_defaults_no_tkl`` / ``lit_defaults_1env`` / ``lit_defaults_no_obs_norm`` (today's defaults with one difference
from SB3's undone: no KL stop, one env x 2,048 steps, no observation normalization: for Swimmer-v5),
``lit_defaults_2env`` (two envs x 1,024 steps: each env's share of a rollout spans a whole 1,000-step episode),
``lit_defaults_stagger`` / ``lit_sb3_stagger`` (today's defaults, and ``lit_sb3``, with ``data.stagger_episodes``: the
four envs' first episodes cut at different steps, so that a rollout does not hold the same half of the episode in
every env),
``lit_defaults_ent01`` (today's defaults with an entropy bonus of 0.01, which keeps ``swimmer.yaml`` out of Swimmer's
slow gait: does it do so at gamma 0.99, and what does it cost Ant now that rewards are not scaled?),
``lit_defaults_mb256`` (today's defaults with minibatches of 256, as RL-Zoo's tuned Swimmer entry that ``swimmer.yaml``
holds: fewer, larger steps per sample),
``lit_defaults_overlap`` / ``lit_defaults_overlap_decoupled`` / ``lit_defaults_overlap_no_tkl`` (today's defaults
with ``data.overlap``, with ``model.decoupled`` too, or without the KL stop), ``lit_stagger_no_tkl`` /
``lit_stagger_tkl05`` (the staggered defaults without the KL stop, or with a stop at 0.05: for Swimmer-v5 and
LunarLanderContinuous-v3), ``lit_stagger_no_obs_norm`` / ``lit_stagger_no_rets`` (the staggered defaults without
observation normalization, or with the critic's targets unscaled), ``lit_stagger_vf1`` (with SB3's value weight),
``lit_stagger_no_tkl_no_obs_norm`` / ``lit_stagger_no_tkl_no_rets`` (without the stop, and one normalization undone),
``lit_stagger_alr01`` / ``lit_stagger_alr02`` (the stop replaced by a learning rate adapted to a KL of 0.01 or 0.02),
``lit_stagger_alrr02`` / ``lit_stagger_alrr02_no_obs_norm`` (adapted once per rollout, to 0.02; and with raw
observations), ``lit_stagger_std05`` (the Gaussian's first std exp(-0.5)), ``lit_stagger_mb256`` /
``lit_stagger_std05_mb256`` / ``lit_stagger_std05_ent01`` (minibatches of 256, with that first std too, or that std with
an entropy bonus of 0.01: for Swimmer-v5), ``lit_stagger_ent01`` / ``lit_stagger_ns256`` (the bonus alone, and 4 x
256-step rollouts: twice the stop's rollouts in a budget),
``sb3`` (SB3's ``PPO("MlpPolicy")`` with its defaults on one env, as SB3's docs run it). Needs the bench extra (and
box2d for LunarLander). The study behind today's defaults: ``docs/results.md``, "Package defaults".

Each lit_ppo run trains in ``OUT_DIR/<out file's stem>_<arm>_<env>_<seed>/``, so two studies never share a run. A run
stopped part-way (its directory has ``checkpoints/last.ckpt`` but no row) continues from that checkpoint
(``--ckpt_path last``; resuming is bit-identical on one machine); its ``wall_s`` is then the last attempt's only.
"""

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from harness import child_env

# SB3's PPO defaults on lit_ppo (4 envs x 512 steps = SB3's 2,048-step rollout)
SB3_LIKE = ["--data.num_envs", "4", "--data.num_steps", "512", "--data.minibatch_size", "64", "--data.update_epochs",
            "10", "--model.lr", "3e-4", "--model.anneal_lr", "false", "--model.ent_coef", "0.0", "--model.target_kl",
            "null", "--data.normalize_obs", "false", "--data.normalize_reward", "false"]
# The package defaults from 2026-12-03 to 2026-12-06 (rewards scaled, an entropy bonus of 0.01 for Box actions, no KL
# stop): the base of the arms that change one of them, so that each still measures what its rows measured
DEFAULTS_1203 = ["--model.ent_coef", "null", "--model.target_kl", "null", "--data.normalize_reward", "true"]
# SB3's KL early stop without the entropy bonus, the base of the arms that vary it
ENT0_TKL = DEFAULTS_1203 + ["--model.ent_coef", "0.0", "--model.target_kl", "0.02"]
ARMS = {
    # the package as it is: since 82ebf41, SB3_LIKE with observation and reward normalization; from 2026-12-03 with an
    # entropy bonus of 0.01 for continuous actions; since 2026-12-06 no bonus, SB3's KL stop at 0.02 and the critic's
    # targets scaled instead of the rewards (lit_ent0_tkl_rets); since 2026-12-07 the first episodes staggered
    # (lit_defaults_stagger). Its rows are the defaults of the day they ran.
    "lit_defaults": [],
    "lit_defaults_1203": DEFAULTS_1203,  # the defaults from 2026-12-03 to 2026-12-06
    # the defaults before 82ebf41: CleanRL's CartPole settings
    "lit_cleanrl": ["--data.num_envs", "4", "--data.num_steps", "128", "--data.minibatch_size", "128",
                    "--data.update_epochs", "4", "--model.lr", "2.5e-4", "--model.anneal_lr", "true",
                    "--model.ent_coef", "0.01", "--model.target_kl", "null", "--data.normalize_obs", "false",
                    "--data.normalize_reward", "false"],
    "lit_sb3like": SB3_LIKE,
    "lit_sb3": SB3_LIKE + ["--model.vf_coef", "1.0"],  # and SB3's value weight (its 0.5 on the plain MSE)
    # SB3_LIKE on SB3's one env x 2,048 steps: with lit_sb3, whether lit_ppo matches SB3 at SB3's own settings
    "lit_sb3like_1env": SB3_LIKE + ["--data.num_envs", "1", "--data.num_steps", "2048"],
    # SB3's settings exactly (its one env and its value weight): whether lit_ppo, as SB3 is run, lands where SB3 does
    "lit_sb3_1env": SB3_LIKE + ["--model.vf_coef", "1.0", "--data.num_envs", "1", "--data.num_steps", "2048"],
    # One difference from SB3's defaults at a time (docs/notebook/results.md, "Continuous control"):
    "lit_1env": DEFAULTS_1203 + ["--data.num_envs", "1", "--data.num_steps", "2048"],  # SB3's one env x 2,048 steps
    "lit_no_obs_norm": DEFAULTS_1203 + ["--data.normalize_obs", "false"],
    "lit_no_reward_norm": DEFAULTS_1203 + ["--data.normalize_reward", "false"],
    "lit_vf1": DEFAULTS_1203 + ["--model.vf_coef", "1.0"],  # SB3's value weight (its 0.5 multiplies the plain MSE)
    "lit_anneal": DEFAULTS_1203 + ["--model.anneal_lr", "true"],  # lr annealed linearly to 0 (CleanRL's continuous)
    "lit_overlap": DEFAULTS_1203 + ["--data.overlap", "true"],  # collecting in a process beside the learner
    "lit_overlap_decoupled": DEFAULTS_1203 + ["--data.overlap", "true", "--model.decoupled", "true"],  # decoupled PPO
    "lit_ent01": DEFAULTS_1203 + ["--model.ent_coef", "0.01"],  # a bonus against the Gaussian's std collapsing early
    "lit_ent0": DEFAULTS_1203 + ["--model.ent_coef", "0.0"],  # no entropy bonus: the defaults before 2026-12-03
    # Ant-v5 (issue 43): which of the remaining differences from SB3's defaults costs the most without the bonus
    "lit_ent0_no_obs_norm": DEFAULTS_1203 + ["--model.ent_coef", "0.0", "--data.normalize_obs", "false"],
    "lit_ent0_no_reward_norm": DEFAULTS_1203 + ["--model.ent_coef", "0.0", "--data.normalize_reward", "false"],
    "lit_ent0_1env": DEFAULTS_1203 + ["--model.ent_coef", "0.0", "--data.num_envs", "1", "--data.num_steps", "2048"],
    # the defaults with Ant-v5's and Humanoid-v5's contact forces left out of the observation (v4's default): a
    # diagnosis, whether normalizing those rarely non-zero inputs is what Ant loses on; only for envs with that kwarg
    "lit_no_cfrc": DEFAULTS_1203 + ["--data.env_kwargs", "{include_cfrc_ext_in_observation: false}"],
    # candidates for Ant-v5 with its contact forces observed: a smaller first std (the MuJoCo recipe's), so that the
    # control cost of a wide Gaussian stops outweighing the healthy reward sooner; and the same without the bonus
    "lit_std05": DEFAULTS_1203 + ["--model.log_std_init", "-0.5"],
    "lit_ent0_std05": DEFAULTS_1203 + ["--model.ent_coef", "0.0", "--model.log_std_init", "-0.5"],
    # a first std of exp(-1) = 0.37: Ant-v5's control cost (0.5 x the sum of 8 squared actions) under a first std of 1
    # is ~2 a step against its healthy reward of 1, so ending the episode early pays until the std has shrunk
    "lit_std1": DEFAULTS_1203 + ["--model.log_std_init", "-1.0"],
    # SB3's value weight (vf_coef 1.0 here is its 0.5 on the plain MSE) with normalization: at SB3's settings it lifted
    # Ant-v5 seed 1 from 857.0 to 1,812.8 (a larger value loss takes more of the one gradient-norm clip)
    "lit_ent0_vf1": DEFAULTS_1203 + ["--model.ent_coef", "0.0", "--model.vf_coef", "1.0"],
    "lit_ent0_std05_vf1": DEFAULTS_1203 + ["--model.ent_coef", "0.0", "--model.log_std_init", "-0.5", "--model.vf_coef",
                                           "1.0"],
    # SB3's defaults exactly, with reward scaling (what Pendulum's and Reacher's wins need)
    "lit_sb3_rs": SB3_LIKE[:-2] + ["--data.normalize_reward", "true", "--model.vf_coef", "1.0"],
    # Ant-v5's approx KL per rollout climbs to 0.3-0.8 under the defaults' settings (10 epochs at a constant lr 3e-4 as
    # the Gaussian narrows): a learning rate annealed to 0, without the bonus too, and SB3's KL early stop
    "lit_ent0_anneal": DEFAULTS_1203 + ["--model.ent_coef", "0.0", "--model.anneal_lr", "true"],
    "lit_tkl": DEFAULTS_1203 + ["--model.target_kl", "0.02"],
    "lit_ent0_tkl": ENT0_TKL,  # the same without the bonus
    # HalfCheetah-v5 under lit_ent0_tkl: its KL stop keeps 5-246 of 320 updates a rollout after the first 250k steps
    # (a median of 18-25 over the last 10) and the runs end in the low mode (1,690-1,784); a looser and a tighter
    # stop (a later flag overrides an earlier one), smaller steps, and no reward scaling
    "lit_ent0_tkl05": ENT0_TKL + ["--model.target_kl", "0.05"],
    "lit_ent0_tkl01": ENT0_TKL + ["--model.target_kl", "0.01"],
    "lit_ent0_tkl_lr1e4": ENT0_TKL + ["--model.lr", "1e-4"],
    "lit_ent0_tkl_no_rs": ENT0_TKL + ["--data.normalize_reward", "false"],
    # Pendulum-v1 needs the reward scaling HalfCheetah-v5 loses on: the critic's targets scaled instead (Tianshou's)
    "lit_ent0_tkl_rets": ENT0_TKL + ["--data.normalize_reward", "false", "--data.return_scaling", "true"],
    # Swimmer-v5 under the defaults ends at ~40-65 on two seeds of three (the Gaussian's entropy 2.8 -> 0.1), where
    # SB3's defaults end at ~100-107 on all three: one difference from SB3 taken out at a time
    "lit_defaults_no_tkl": ["--model.target_kl", "null"],
    "lit_defaults_1env": ["--data.num_envs", "1", "--data.num_steps", "2048"],  # SB3's one env x 2,048 steps
    "lit_defaults_no_obs_norm": ["--data.normalize_obs", "false"],
    # two envs x 1,024 steps: each env's part of a rollout spans a whole 1,000-step episode, as SB3's one env does
    "lit_defaults_2env": ["--data.num_envs", "2", "--data.num_steps", "1024"],
    # the first episodes staggered: four envs x 512 steps that do not all play the same half of every episode
    "lit_defaults_stagger": ["--data.stagger_episodes", "true"],
    "lit_sb3_stagger": SB3_LIKE + ["--model.vf_coef", "1.0", "--data.stagger_episodes", "true"],
    "lit_defaults_ent01": ["--model.ent_coef", "0.01"],  # swimmer.yaml's bonus
    "lit_defaults_mb256": ["--data.minibatch_size", "256"],  # swimmer.yaml's fewer, larger steps per sample
    # today's defaults overlapped (Cleanba's clip; since 1315c17 the KL stop measures from the learner's policy)
    "lit_defaults_overlap": ["--data.overlap", "true"],
    "lit_defaults_overlap_decoupled": ["--data.overlap", "true", "--model.decoupled", "true"],
    "lit_defaults_overlap_no_tkl": ["--data.overlap", "true", "--model.target_kl", "null"],
    # Swimmer-v5 under the staggered defaults: the KL stop keeps 9-50 of 320 updates a rollout after 150k steps and the
    # fast stroke comes at 800-900k, where SB3's settings staggered (no stop) reach it by ~300k; LunarLanderContinuous
    # seed 3 stalls at 107.1. Without the stop and with a looser one (Ant-v5 needs one: 244.6 without, rewards scaled)
    "lit_stagger_no_tkl": ["--data.stagger_episodes", "true", "--model.target_kl", "null"],
    "lit_stagger_tkl05": ["--data.stagger_episodes", "true", "--model.target_kl", "0.05"],
    # SB3's settings staggered reach the stroke by 300k steps without normalizing anything: the observations and the
    # critic's targets left raw, one at a time
    "lit_stagger_no_obs_norm": ["--data.stagger_episodes", "true", "--data.normalize_obs", "false"],
    "lit_stagger_no_rets": ["--data.stagger_episodes", "true", "--data.return_scaling", "false"],
    # SB3's value weight (its 0.5 on the plain MSE) on the staggered defaults: the last of SB3's settings not yet tried
    # under the KL stop; without the stop it lifted Ant-v5 (lit_ent0_vf1, lit_sb3)
    "lit_stagger_vf1": ["--data.stagger_episodes", "true", "--model.vf_coef", "1.0"],
    # Swimmer-v5 without the stop: the staggered defaults stay in the slow gait (~50), where SB3's settings staggered
    # (nothing normalized) reach 113: which normalization keeps it there without the stop (the one that does not,
    # raw observations, also ran on Ant-v5: what it costs there)
    "lit_stagger_no_tkl_no_obs_norm": ["--data.stagger_episodes", "true", "--model.target_kl", "null",
                                       "--data.normalize_obs", "false"],
    "lit_stagger_no_tkl_no_rets": ["--data.stagger_episodes", "true", "--model.target_kl", "null",
                                   "--data.return_scaling", "false"],
    # The KL held by the learning rate instead of a hard stop (rsl_rl's adaptive schedule at its 0.01, and at 0.02):
    # Swimmer-v5 needs more than the stop's 44-63 updates a rollout, Ant-v5 needs the KL held (559.4 / 456.4 without)
    "lit_stagger_alr01": ["--data.stagger_episodes", "true", "--model.target_kl", "null", "--model.adaptive_lr_kl",
                          "0.01"],
    "lit_stagger_alr02": ["--data.stagger_episodes", "true", "--model.target_kl", "null", "--model.adaptive_lr_kl",
                          "0.02"],
    # The same rule once per rollout (the per-minibatch one pins the rate at 1e-5 by every rollout's end with the
    # defaults' 320 minibatches: Ant-v5 at 21 / 197 after 400k steps), with observations normalized and raw
    "lit_stagger_alrr02": ["--data.stagger_episodes", "true", "--model.target_kl", "null", "--model.adaptive_lr_kl",
                           "0.02", "--model.adaptive_lr_every", "rollout"],
    "lit_stagger_alrr02_no_obs_norm": ["--data.stagger_episodes", "true", "--model.target_kl", "null",
                                       "--model.adaptive_lr_kl", "0.02", "--model.adaptive_lr_every", "rollout",
                                       "--data.normalize_obs", "false"],
    # A narrower first Gaussian (std exp(-0.5), Spinning Up's and the recipe configs' start): on Ant-v5 it quadrupled
    # the 2026-12-03 defaults without the bonus (lit_ent0_std05 1,031.1 against 244.6). Measured on every Box row:
    # Ant-v5 and Humanoid-v5 far above the defaults, Swimmer-v5 in the slow gait on every seed (docs/zoo.md)
    "lit_stagger_std05": ["--data.stagger_episodes", "true", "--model.log_std_init", "-0.5"],
    # Swimmer-v5 under the stop applies 44-63 of 320 updates a rollout: minibatches of 256 (swimmer.yaml's, RL-Zoo's)
    # spend the stop's KL on less gradient noise, 80 updates a rollout at most; with the narrower Gaussian too (Ant-v5's
    # and Humanoid-v5's win), and that Gaussian kept wide by swimmer.yaml's old entropy bonus of 0.01 instead
    "lit_stagger_mb256": ["--data.stagger_episodes", "true", "--data.minibatch_size", "256"],
    "lit_stagger_std05_mb256": ["--data.stagger_episodes", "true", "--model.log_std_init", "-0.5",
                                "--data.minibatch_size", "256"],
    # the bonus on today's first std, and rollouts of 4 x 256 steps: under the stop each rollout moves the policy by
    # about the same KL, so twice the rollouts in a budget move it twice as far
    "lit_stagger_ent01": ["--data.stagger_episodes", "true", "--model.ent_coef", "0.01"],
    "lit_stagger_ns256": ["--data.stagger_episodes", "true", "--data.num_steps", "256"],
    "lit_stagger_std05_ent01": ["--data.stagger_episodes", "true", "--model.log_std_init", "-0.5", "--model.ent_coef",
                                "0.01"],
    "sb3": None,
}
# Every arm but the package as it is was measured before the defaults it does not set changed: it pins the ones it
# ran with, so that its rows stay its own (an arm that sets a key keeps its setting): the first episodes unstaggered
# (staggered by default since 2026-12-07), the Gaussian's first std 1 and no entropy bonus (a first std of 0.61 and
# a bonus of 0.01 for Box actions by default since 2026-12-08)
PINNED = {"--data.stagger_episodes": "false", "--model.log_std_init": "0.0", "--model.ent_coef": "0.0"}
ARMS = {arm: args if args is None or arm == "lit_defaults"
        else [x for key, value in PINNED.items() if key not in args for x in (key, value)] + args
        for arm, args in ARMS.items()}
EVAL_EPISODES = 20
# lit_ppo's refusal to resume a fit that has spent its budget: a run stopped after its fit, before its evaluation
FIT_DONE = "which leaves less than one rollout"


def lit_run(env_id: str, steps: int, seed: int, overrides: list, cwd: Path) -> float:
    # a run stopped part-way left its last.ckpt: continue it, where a fresh fit would refuse the used directory
    resume = ["--ckpt_path", "last"] if (cwd / "checkpoints" / "last.ckpt").exists() else []
    cwd.mkdir(parents=True, exist_ok=True)
    common = ["--data.env_id", env_id, "--seed_everything", str(seed), "--trainer.enable_progress_bar", "false"]
    for args in (["fit", *common, "--data.total_timesteps", str(steps), *overrides, *resume],
                 ["validate", *common, *overrides, "--data.eval_episodes", str(EVAL_EPISODES), "--trainer.logger",
                  "false", "--ckpt_path", "checkpoints/last.ckpt"]):
        proc = subprocess.run([sys.executable, "-m", "lit_ppo", *args], cwd=cwd, env=child_env(), capture_output=True,
                              text=True)
        if proc.returncode != 0 and not (resume and args[0] == "fit" and FIT_DONE in proc.stderr):
            raise SystemExit(f"lit_ppo {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return float(re.search(r"eval/return_mean\s*│?\s*([-\d.]+)", proc.stdout).group(1))


def sb3_worker(env_id: str, steps: int, seed: int) -> float:
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    from baselines import without_sb3_log_dir

    model = without_sb3_log_dir(PPO("MlpPolicy", env_id, seed=seed, device="cpu", verbose=0))
    model.learn(total_timesteps=steps)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * EVAL_EPISODES)
    obs, _ = envs.reset(seed=seed + 1_000_003)
    returns, finished = np.zeros(EVAL_EPISODES), np.zeros(EVAL_EPISODES, dtype=bool)
    while not finished.all():
        obs, reward, terminated, truncated, _ = envs.step(model.predict(obs, deterministic=True)[0])
        returns += reward * ~finished
        finished |= terminated | truncated
    return float(returns.mean())


def markdown(rows: list, envs: list, arms: list, seeds: list) -> list:
    """The docs' table of the finished runs: a row per env spec ("ENV:STEPS"), a column per arm, each cell the mean
    final score over the ``seeds`` that ran, with every seed's score in seed order ("—" for one that did not, and
    for a cell with none). A seed run twice (on another machine) counts once, by its last row."""
    lines = ["| env, budget | " + " | ".join(f"`{arm}`" for arm in arms) + " |", "|---" * (len(arms) + 1) + "|"]
    for spec in envs:
        env_id, steps = spec.rsplit(":", 1)
        cells = []
        for arm in arms:
            by_seed = {r["seed"]: r["eval"] for r in rows
                       if (r["arm"], r["env"], r["steps"]) == (arm, env_id, int(steps)) and r["seed"] in seeds}
            values = list(by_seed.values())
            cells.append(f"{sum(values) / len(values):,.1f} (" + " / ".join(
                f"{by_seed[s]:,.1f}" if s in by_seed else "—" for s in seeds) + ")" if values else "—")
        lines.append(f"| {env_id}, {int(steps):,} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", help="ENV_ID:STEPS", default=[
        "LunarLander-v3:1000000", "Acrobot-v1:500000", "Pendulum-v1:200000",  # discrete, then continuous actions:
        "LunarLanderContinuous-v3:1000000", "InvertedPendulum-v5:100000", "Reacher-v5:100000"])
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--out", type=Path, default=Path("bench_runs/defaults/results.jsonl"))
    parser.add_argument("--report", action="store_true", help="print the markdown table of the runs in --out for "
                        "these envs, arms and seeds, and run nothing")
    parser.add_argument("--worker", nargs=3, metavar=("ENV", "STEPS", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps({"eval": sb3_worker(args.worker[0], int(args.worker[1]), int(args.worker[2]))}))
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = [json.loads(line) for line in args.out.read_text().splitlines()] if args.out.exists() else []
    if args.report:
        print("\n".join(markdown(done, args.envs, args.arms, args.seeds)))
        return
    for spec in args.envs:
        env_id, steps = spec.rsplit(":", 1)
        for seed in args.seeds:
            for arm in args.arms:
                if any(r["arm"] == arm and r["env"] == env_id and r["seed"] == seed and r["steps"] == int(steps)
                       for r in done):
                    continue
                start = time.perf_counter()
                if ARMS[arm] is None:
                    proc = subprocess.run([sys.executable, __file__, "--worker", env_id, steps, str(seed)],
                                          env=child_env(), capture_output=True, text=True, check=True)
                    value = json.loads(proc.stdout.strip().splitlines()[-1])["eval"]
                else:
                    run_dir = args.out.parent / f"{args.out.stem}_{arm}_{env_id}_{seed}"  # this study's own
                    value = lit_run(env_id, int(steps), seed, ARMS[arm], run_dir)
                row = dict(arm=arm, env=env_id, steps=int(steps), seed=seed, eval=value,
                           wall_s=round(time.perf_counter() - start, 1))
                done.append(row)
                with args.out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    print("\n" + "\n".join(markdown(done, args.envs, args.arms, args.seeds)))


if __name__ == "__main__":
    main()
