"""The command line: ``python -m lit_ppo fit|validate|test --config cartpole.yaml``, a LightningCLI."""

import importlib
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Optional

import torch
from lightning.pytorch.accelerators import CPUAccelerator, CUDAAccelerator
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_only, rank_zero_warn

from lit_ppo.callbacks import default_callbacks
from lit_ppo.checkpointing.settings import POLICY_DATA_KEYS, data_settings_from_checkpoint, model_settings_from_checkpoint
from lit_ppo.checkpointing import files
from lit_ppo.checkpointing.files import check_checkpoint_file
from lit_ppo.checkpointing.io import CheckedCheckpointIO, check_fresh_checkpoint_dirs
from lit_ppo.config_checks import check_command_line, explicit_settings
from lit_ppo.collection.datamodule import PPODataModule, reward_scaling
from lit_ppo.errors import ConfigError, EnvStepError, NonFiniteError
from lit_ppo.learning.module import PPOModule

CONFIG_DIR = Path(__file__).parent / "configs"

# Commands beside LightningCLI's fit/validate/test/predict: name -> "module:function", imported only when
# used so that optional dependencies stay out of the training import path. Each function takes argv[2:].
TOOL_COMMANDS: dict[str, str] = {
    "plot": "lit_ppo.tools.plot:main",
    "export": "lit_ppo.tools.export:main",
    "profile": "lit_ppo.tools.profile:main",
    "tune": "lit_ppo.tools.tune:main",
}
# What `python -m lit_ppo` sets beside the user's config: the seed, and a Trainer bounded by the step budget.
# Evaluation every 50 iterations unless the config says otherwise (Lightning's default, every epoch, would evaluate
# after every rollout: a no-config CartPole fit was ~5x slower for it).
CLI_DEFAULTS: dict = {"seed_everything_default": 1, "trainer_defaults": {
    "max_epochs": -1, "num_sanity_val_steps": 0, "check_val_every_n_epoch": 50}}


class PPOCLI(LightningCLI):
    def __init__(self, *args, run_subcommand: Optional[str] = None, **kwargs) -> None:
        self.run_subcommand = run_subcommand
        # From lit_ppo's check of --ckpt_path (parse_arguments) until LightningCLI has read the file again (before
        # before_instantiate_classes): a file cut short in between is named, not met as torch's traceback.
        self.ckpt_path_read: Optional[str] = None
        try:
            super().__init__(*args, **kwargs)
        except Exception:
            if self.ckpt_path_read is not None:
                files.check_checkpoint_file(self.ckpt_path_read)  # raises, naming the file, where it changed
            raise

    def subcommands(self) -> dict[str, set[str]]:
        # Each subcommand's parser is built from the Trainer's, the model's and the data's signatures (~50 ms
        # apiece): when the command line names the subcommand, only its parser is built (help and errors for
        # anything else still list them all).
        every = LightningCLI.subcommands()
        return {self.run_subcommand: every[self.run_subcommand]} if self.run_subcommand in every else every

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_argument(
            "--torch_threads",
            type=Optional[int],
            default=1,
            help="torch intra-op threads in this process (null: torch's default). One thread is fastest for "
            "small-network PPO: many tiny ops lose more to thread hand-off than they gain.",
        )
        # The model's input/output sizes come from the environment; users never repeat them.
        parser.link_arguments("data.env_spec", "model.env_spec", apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        self.ckpt_path_read = None
        config = self.config.get(self.subcommand, self.config) if self.subcommand else self.config
        threads = config.get("torch_threads")
        if threads is not None:
            if threads < 1:
                raise ConfigError(f"torch_threads: must be >= 1 or null, got {threads}.")
            torch.set_num_threads(threads)

    def parse_arguments(self, parser, args) -> None:
        super().parse_arguments(parser, args)
        # Checked right after parsing: LightningCLI reads the checkpoint's hyperparameters next, and a missing,
        # empty or corrupt file should be named, not met as a torch.load traceback.
        subcommand = self.config.get("subcommand")
        if not subcommand:
            return
        ckpt_path = self.config[subcommand].get("ckpt_path")
        checkpoint = check_checkpoint_file(ckpt_path)
        self.ckpt_path_read = ckpt_path if checkpoint is not None else None
        if checkpoint is not None and checkpoint.get("hyper_parameters"):
            # The settings that define the trained policy follow the checkpoint file unless set to something else
            # (then refused; lit_ppo.checkpointing.settings), the environment first. LightningCLI next replaces the
            # other model settings with the checkpoint's; everything replaced is said once.
            explicit = explicit_settings(sys.argv[1:] if args is None else args)
            saved = checkpoint["hyper_parameters"]
            data = self.config[subcommand]["data"]
            requested_data = {key: data[key] for key in POLICY_DATA_KEYS}
            # compared as they apply: the checkpoint's env_spec holds them with their nulls resolved
            requested_data["normalize_reward"], requested_data["return_scaling"] = reward_scaling(
                data["normalize_reward"], data["return_scaling"])
            taken = data_settings_from_checkpoint(saved.get("env_spec") or {}, requested_data, explicit, ckpt_path)
            requested = self.config[subcommand]["model"]
            requested = dict(vars(requested)) if not isinstance(requested, dict) else requested
            replaced = model_settings_from_checkpoint(saved, requested, explicit, ckpt_path)
            for key, value in taken.items():
                replaced.append(f"data.{key}: {value!r} (not {requested_data[key]!r})")
                data[key] = value
            if replaced and rank_zero_only.rank == 0:
                print(f"lit_ppo: settings from {ckpt_path} (a checkpoint file's hyperparameters replace the "
                      f"config's; `--ckpt_path last` keeps the config's): {'; '.join(replaced)}", file=sys.stderr)

    def _check_placement(self) -> None:
        """Placements that cannot work fail here, in the launching process, before any process or env starts."""
        trainer, model = self.trainer, self.model
        cores = os.cpu_count() or 1
        if isinstance(trainer.accelerator, CPUAccelerator) and trainer.num_devices > cores:
            raise ConfigError(
                f"trainer.devices: {trainer.num_devices} CPU processes requested, but this machine has {cores} CPU "
                f"core(s); each process steps its own environments and trains, so use --trainer.devices {cores} or "
                "fewer (or --trainer.num_nodes to spread over machines)."
            )
        if model.hparams.actor_device == "cuda" and not isinstance(trainer.accelerator, CUDAAccelerator):
            # data.overlap acts on the CPU only (PPODataModule.set_policy refuses the rest): no advice it then refuses
            overlap = bool(getattr(self.datamodule, "hparams", {}).get("overlap"))
            options = ("'cpu' (data.overlap acts on the CPU)" if overlap
                       else "'cpu' or 'auto', or --trainer.accelerator gpu")
            raise ConfigError(
                f"model.actor_device: 'cuda' needs a CUDA learner, but the Trainer runs on "
                f"{type(trainer.accelerator).__name__} (CUDA available: {torch.cuda.is_available()}). "
                f"Use {options}."
            )

    def before_fit(self) -> None:
        self._check_placement()
        hparams = self.model.hparams
        if getattr(self.datamodule, "hparams", {}).get("overlap") and hparams.target_kl is not None \
                and not hparams.decoupled:
            # measured, not derived: docs/hardware.md, "Collecting while learning"
            rank_zero_warn(f"lit_ppo: model.target_kl {hparams.target_kl} with data.overlap and Cleanba's clip "
                           "(model.decoupled: false) learned far less on Pendulum-v1 with the package defaults "
                           "(-363.9 over 3 seeds at 200k steps, against -158.3 synchronous). Set model.decoupled: "
                           "true (-154.0) or model.target_kl: null (-147.5).")
        check_fresh_checkpoint_dirs(self.trainer, resuming=self.config["fit"].get("ckpt_path") is not None)

    # LightningCLI calls before_<subcommand>() after instantiating everything, before the Trainer runs.
    before_validate = before_test = before_predict = _check_placement

    def instantiate_trainer(self, **kwargs):
        # lit_ppo's progress bar (environment steps) and predict's CSV writer, where the config has none.
        config = self.config_init.get(self.subcommand, self.config_init) if self.subcommand else self.config_init
        trainer_config = config.get("trainer") or {}
        configured = trainer_config.get("callbacks") or []
        configured = list(configured) if isinstance(configured, list) else [configured]
        added = default_callbacks(self.subcommand, trainer_config, configured)
        if not trainer_config.get("plugins"):  # a checkpoint that cannot be read is named (checkpointing.py)
            kwargs.setdefault("plugins", [CheckedCheckpointIO()])
        return super().instantiate_trainer(**{"callbacks": configured + added, **kwargs})


class SaveConfigKeepingYours(SaveConfigCallback):
    """Lightning's config saving (``config.yaml`` in the log directory, replacing the one of an earlier run there),
    except over a file Lightning did not write: without a logger the log directory is the working directory, where
    ``config.yaml`` may be the user's own config, which ``--trainer.logger false`` would otherwise overwrite."""

    HEADER = "# lightning.pytorch=="  # how every config Lightning saves begins

    def setup(self, trainer, pl_module, stage: str) -> None:
        if self.save_to_log_dir and not self.already_saved:
            path = os.path.join(trainer.log_dir, self.config_filename)
            fs = get_filesystem(path)
            foreign = False
            if trainer.is_global_zero and fs.isfile(path):
                with fs.open(path, "r") as f:
                    foreign = not f.read(len(self.HEADER)).startswith(self.HEADER)
            if trainer.strategy.broadcast(foreign):  # every rank skips together
                rank_zero_warn(f"lit_ppo: {path} was not written by Lightning: it is kept as it is, and this run's "
                               "config is not saved (give the run a logger, or run it from another directory).")
                self.already_saved = True
                return
        super().setup(trainer, pl_module, stage)


def instantiate(args: list[str]) -> PPOCLI:
    """The model, data module and Trainer that ``fit`` with ``args`` (a config and overrides, no subcommand) would
    run, built but not run (``.model``, ``.datamodule``, ``.trainer``): for tools that drive fits themselves
    (``lit_ppo tune``). Bad settings raise :class:`ConfigError` as in ``fit``."""
    _quiet_known_warnings("fit")
    # The tool's own command line is in sys.argv; the fit's is `args`, on purpose.
    warnings.filterwarnings("ignore", message=".*args parameter is intended to run from within Python.*")
    args = resolve_config_paths(args)
    check_command_line(args)
    return PPOCLI(PPOModule, PPODataModule, args=args, run=False, save_config_callback=None, **CLI_DEFAULTS)


def resolve_config_paths(args: list[str]) -> list[str]:
    """A bare config name that is not a file here (``--config cartpole.yaml``) means the shipped config."""
    resolved = list(args)
    for i, arg in enumerate(resolved):
        if arg in ("--config", "-c") and i + 1 < len(resolved):
            resolved[i + 1] = shipped_config(resolved[i + 1])
        elif arg.startswith("--config="):
            resolved[i] = "--config=" + shipped_config(arg.split("=", 1)[1])
    return resolved


def shipped_config(path: str) -> str:
    """``path`` itself where it is a file (or names a directory), else the shipped config of that name if any."""
    if Path(path).exists() or "/" in path:
        return path
    shipped = CONFIG_DIR / path
    return str(shipped) if shipped.exists() else path


def explain_lightning_error(err: MisconfigurationException) -> ConfigError:
    """Lightning's own configuration errors in lit_ppo's one-line form: the config key, the problem, the fix."""
    message = str(err).strip()
    if "Trainer(devices=" in message:
        return ConfigError(f"trainer.devices: {message} Use a positive count (e.g. 1), a list of device indices "
                           "or 'auto'.")
    if "gpu backend" in message or "can not run on your system" in message:
        return ConfigError(f"trainer.accelerator: {message} This machine has no usable GPU (CUDA available: "
                           f"{torch.cuda.is_available()}); use --trainer.accelerator cpu or auto.")
    restored = re.search(r"current_epoch=(\d+).*max_epochs=(-?\d+)", message)
    if restored:
        done = int(restored.group(1))
        return ConfigError(f"trainer.max_epochs: {restored.group(2)} is below the checkpoint's {done} iterations "
                           f"done; resume with --trainer.max_epochs above {done}, or -1 to train to "
                           "data.total_timesteps. The checkpoint is unchanged.")
    return ConfigError(f"trainer: {message}")


def _quiet_known_warnings(subcommand: Optional[str]) -> None:
    """Silence warnings about things a lit_ppo user cannot act on; everything else is left as it is."""
    # The first two are about setups lit_ppo never uses: worker processes (rollouts need num_workers=0) and per-step
    # logging (lit_ppo logs once per rollout, at epoch end).
    warnings.filterwarnings("ignore", message=".*IterableDataset. has .__len__. defined.*")
    warnings.filterwarnings("ignore", message=".*smaller than the logging interval.*")
    # PPOModule.transfer_batch_to_device is deliberate (no-op on CPU, non-blocking copies otherwise).
    warnings.filterwarnings("ignore", message=".*overridden `transfer_batch_to_device`.*")
    # The progress-bar/monitor keys are computed from already-reduced values: identical on every rank.
    warnings.filterwarnings("ignore", message=".*when logging on epoch level in distributed setting.*")
    # Lightning 2.6's own pytree helper calls an API torch deprecated (torch.utils._pytree.LeafSpec): printed on
    # every fit and validate, nothing for a user to change.
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated.*",
                            category=FutureWarning)
    if subcommand in ("validate", "test", "predict"):
        # Evaluation saves no checkpoint: which directory a ModelCheckpoint would save to does not matter there.
        warnings.filterwarnings("ignore", message=".*The dirpath has changed from.*")


def main(args: Optional[list[str]] = None) -> None:
    """Entry point of ``python -m lit_ppo``; ``args`` replaces ``sys.argv[1:]`` when given."""
    argv = sys.argv[1:] if args is None else list(args)
    if argv and argv[0] in TOOL_COMMANDS:
        module_name, function = TOOL_COMMANDS[argv[0]].split(":")
        sys.exit(getattr(importlib.import_module(module_name), function)(argv[1:]))
    _quiet_known_warnings(argv[0] if argv else None)
    if args is None:
        sys.argv[1:] = resolve_config_paths(sys.argv[1:])
    else:
        args = resolve_config_paths(args)
    try:
        check_command_line(sys.argv[1:] if args is None else args)
        PPOCLI(PPOModule, PPODataModule, args=args, run_subcommand=argv[0] if argv else None,
               save_config_callback=SaveConfigKeepingYours, save_config_kwargs={"overwrite": True}, **CLI_DEFAULTS)
    except MisconfigurationException as err:  # every rank meets the same configuration: said once
        _fail(explain_lightning_error(err), every_rank=True)
    except (ConfigError, EnvStepError, NonFiniteError) as err:
        _fail(err, getattr(err, "every_rank", False))
    except RuntimeError as err:
        if not lost_peer(err):
            raise
        reason = str(err).splitlines()[0].split(". This is typically")[0][:300]  # gloo's first sentence
        print(f"lit_ppo: error: rank {torch.distributed.get_rank()} lost contact with another process of the run "
              f"({reason}): that process ended or its machine went away; see its own output for why. The last "
              "checkpoint saved before it is unchanged: resume with --ckpt_path last.",
              file=sys.stderr)
        sys.exit(2)  # the process group is not destroyed: that is a collective, with a peer that is gone


# What gloo and NCCL say when a peer process has gone (killed, crashed, its machine lost)
LOST_PEER = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "NCCL communicator was aborted",
             "Socket Timeout", "Connection refused")


def lost_peer(err: RuntimeError) -> bool:
    """Whether ``err`` is a collective failing because another rank of this run is gone."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()
            and torch.distributed.get_world_size() > 1):
        return False
    return isinstance(err, torch.distributed.DistError) or any(words in str(err) for words in LOST_PEER)


def _fail(err: Exception, every_rank: bool) -> None:
    """Print ``err`` as one line (on rank 0 only where every rank raised it) and exit with status 2."""
    if rank_zero_only.rank == 0 or not every_rank:
        print(f"lit_ppo: error: {err}", file=sys.stderr)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # Every rank stops here together; left to interpreter exit, the process group aborts the process.
        torch.distributed.destroy_process_group()
    sys.exit(2)
