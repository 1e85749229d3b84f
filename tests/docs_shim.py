"""``python`` as the documentation's shell examples meet it in ``tests/test_docs.py``: ``python -m lit_ppo ...`` runs
as written with a small budget added, anything else runs as it is.

The budget: a ``fit`` trains two rollouts of its config (after the checkpoint's steps when it resumes), evaluating
after each on 2 episodes, and starts over as the docs say a new run must (its checkpoint directory removed);
``validate``/``test``/``predict`` play 2 episodes; ``tune`` runs 1 trial. A command that names
``runs/NAME/checkpoints/*.ckpt`` before any example made it gets it from a two-rollout fit of ``NAME.yaml`` first
(what the page assumes a reader trained). Commands whose environment needs an optional package that is not
installed (MuJoCo, Box2D, ALE) print ``not run: ...`` and exit 0; the test reports them.

The command runs in this process (as ``runpy`` runs ``-m``), not in a child: one interpreter start-up and one
Lightning import per command instead of two, which roughly halved the docs pages' share of the suite. Under the
suite's fork server (``tests/cli_server.py``, whose socket ``LIT_PPO_TEST_CLI_SERVER`` names) it runs in a process
forked from the server instead, which has imported them already.
"""

import importlib.util
import inspect
import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

NEEDS = {"mujoco": ("Hopper", "Walker2d", "HalfCheetah", "Ant", "Humanoid", "Swimmer", "Reacher", "Inverted"),
         "Box2D": ("LunarLander", "BipedalWalker", "CarRacing"),
         "mpe2": ("simple_spread", "simple_speaker"), "vmas": ("vmas.",), "ale_py": ("ale_py", "Breakout", "Pong")}


def option(args: list[str], name: str):
    """The last value given for ``--name`` (``--name V`` or ``--name=V``), or None."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def config_data(args: list[str]) -> dict:
    import yaml

    from lit_ppo.cli import shipped_config

    data: dict = {}
    for i, arg in enumerate(args):
        if arg == "--config" and i + 1 < len(args):
            path = shipped_config(args[i + 1])
            if os.path.isfile(path):
                data.update((yaml.safe_load(open(path)) or {}).get("data") or {})
    return data


def rollout_size(args: list[str]) -> int:
    from lit_ppo.collection.datamodule import PPODataModule

    defaults = inspect.signature(PPODataModule).parameters
    data = config_data(args)
    size = 1
    for key in ("num_envs", "num_steps"):
        given = option(args, f"--data.{key}")
        size *= int(given if given is not None else data.get(key, defaults[key].default))
    return size


def missing_package(args: list[str]) -> str:
    from lit_ppo.config_checks import LOGGER_PACKAGES, config_files

    text = " ".join(args) + " ".join(content for _, content in config_files(args))
    for logger, (package, _) in LOGGER_PACKAGES.items():  # e.g. a config listing the W&B logger
        if logger in text and importlib.util.find_spec(package) is None:
            return package
    env_id = option(args, "--data.env_id") or config_data(args).get("env_id", "CartPole-v1")
    for package, markers in NEEDS.items():
        if any(marker in env_id for marker in markers) and importlib.util.find_spec(package) is None:
            return package
    return ""


def lit_ppo(args: list[str]) -> int:
    # imported here: the shim's other commands (``python -m pytest``) need neither torch nor Lightning
    import torch

    from lit_ppo.cli import shipped_config

    sub = args[0] if args else ""
    extra: list[str] = []
    if sub in ("fit", "validate", "test", "predict"):
        if (package := missing_package(args)):
            print(f"not run: python -m lit_ppo {' '.join(args)} (needs {package})")
            return 0
        # rows of a multi-agent env are agents: its config's eval_episodes is already the multiple of them it needs
        vectorization = str(config_data(args).get("vectorization", ""))
        if not any(rows in vectorization for rows in ("lit_ppo.envs.multiagent", "lit_ppo.envs.vmas_rows")):
            extra += ["--data.eval_episodes", "2"]
        extra += ["--trainer.enable_progress_bar", "false"]
    ckpt = option(args, "--ckpt_path")
    if ckpt and ckpt != "last" and not os.path.exists(ckpt):
        made = re.fullmatch(r"runs/(\w+)/checkpoints/\w+\.ckpt", ckpt)
        if made and os.path.isfile(shipped_config(f"{made.group(1)}.yaml")):
            fit = ["fit", "--config", f"{made.group(1)}.yaml"]
            if (package := missing_package(fit)):
                print(f"not run: python -m lit_ppo {' '.join(args)} (its checkpoint's environment needs {package})")
                return 0
            if (code := lit_ppo(fit)) != 0:
                return code
    if sub == "fit":
        steps = 0
        if ckpt is None:  # a new run: as the docs say, its earlier checkpoints go first
            for directory in [*Path(".").glob("runs/*/checkpoints"), Path("checkpoints")]:
                shutil.rmtree(directory, ignore_errors=True)
        else:
            path = ckpt if ckpt != "last" else next(iter(Path(".").glob("runs/*/checkpoints/last.ckpt")), None)
            if path is not None and os.path.exists(path):
                steps = int(torch.load(path, map_location="cpu", weights_only=True).get("lit_ppo_env_steps", 0))
        extra += ["--data.total_timesteps", str(steps + 2 * rollout_size(args)), "--trainer.max_steps", "-1",
                  "--trainer.check_val_every_n_epoch", "1"]
    if sub == "tune":
        extra += ["--trials", "1", "--eval-every", "1", "--data.total_timesteps", "8192"]
    return run_module("lit_ppo", [*args, *extra])


def run_module(name: str, args: list[str]) -> int:
    """``python -m name args`` in this process: its exit status."""
    sys.argv = [name, *args]
    try:
        runpy.run_module(name, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if isinstance(exit_.code, str):  # as the interpreter does: the message on stderr, status 1
            print(exit_.code, file=sys.stderr)
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return 0


def main() -> int:
    args = sys.argv[1:]
    if args[:2] == ["-m", "lit_ppo"] and os.environ.get("LIT_PPO_TEST_CLI_SERVER"):
        # forked from the suite's fork server (tests/cli_server.py): torch and Lightning are imported there already
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.cli_server import request

        return request(os.environ["LIT_PPO_TEST_CLI_SERVER"], "docs_shim", args[2:], os.getcwd(), dict(os.environ),
                       (0, 1, 2))
    if args[:2] == ["-m", "lit_ppo"]:
        return lit_ppo(args[2:])
    if args[:2] == ["-m", "pytest"]:  # the suite that runs this
        print(f"not run: python {' '.join(args)} (the test suite itself)")
        return 0
    return subprocess.call([sys.executable, *args])


if __name__ == "__main__":
    sys.exit(main())
