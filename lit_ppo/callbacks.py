"""Callbacks: a progress bar in environment steps, evaluation videos, and the CSV writer of ``predict``.

Only Lightning and lit_ppo are imported here; the video libraries (imageio, moviepy, pygame) are imported when a
video is recorded, so ``fit`` without :class:`EvaluationVideo` never needs them.
"""

import csv
import importlib.util
import os
import warnings
from pathlib import Path
from typing import Any, Optional

import lightning as L
import numpy as np
import torch
from gymnasium.vector.utils import concatenate, create_empty_array
from lightning.pytorch.callbacks import BasePredictionWriter, Callback, ProgressBar, TQDMProgressBar
from lightning.pytorch.utilities import rank_zero_warn
from tqdm import tqdm  # tqdm.write: a line printed above any open progress bar

from lit_ppo.envs import actions_to_env, make_env, observations_to_tensor

# Read from the module's latest rollout (it does not self.log them): the numbers PPO users watch.
BAR_METRICS = ("rollout/return_mean", "time/sps")
HIDDEN_BAR_METRICS = ("time/env_steps", "v_num")  # the bar's own count; the logger's version
TB_PREVIEW_WIDTH = 320


def _short(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


class EnvStepProgressBar(TQDMProgressBar):
    """Lightning's TQDM bar, counting environment steps against the budget instead of one rollout's batches.

    The training bar advances once per rollout and shows the latest logged ``time/sps`` and
    ``rollout/return_mean``::

        env steps:  41%|████      | 41k/100k [00:09<00:13, 4.5kstep/s, rollout/return_mean=187.3, time/sps=4512]

    With a data module that has no ``steps_per_iteration`` it is Lightning's bar unchanged.
    """

    def _steps_per_iteration(self, trainer: "L.Trainer") -> Optional[int]:
        return getattr(trainer.datamodule, "steps_per_iteration", None)

    def on_train_start(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        super().on_train_start(trainer, pl_module)
        per_iteration = self._steps_per_iteration(trainer)
        if per_iteration is None:
            return
        bar = self.train_progress_bar
        # The data module has already turned the budget into max_epochs (in setup).
        bar.reset(total=trainer.max_epochs * per_iteration)
        bar.initial = bar.n = trainer.current_epoch * per_iteration  # a resumed run starts part-way
        bar.unit, bar.unit_scale = "step", True
        bar.set_description("env steps")

    def on_train_epoch_start(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if self._steps_per_iteration(trainer) is None:
            return super().on_train_epoch_start(trainer, pl_module)
        # The previous rollout's metrics are logged by now (at on_train_epoch_end, callbacks run before the
        # module logs), so this is where the bar catches up.
        self._show_progress(trainer, pl_module)

    def on_train_batch_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule", *args: Any) -> None:
        if self._steps_per_iteration(trainer) is None:
            super().on_train_batch_end(trainer, pl_module, *args)

    def on_train_epoch_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if self._steps_per_iteration(trainer) is None:
            super().on_train_epoch_end(trainer, pl_module)

    def on_train_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if self._steps_per_iteration(trainer) is not None:
            self._show_progress(trainer, pl_module)
        super().on_train_end(trainer, pl_module)

    def _show_progress(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        bar = self.train_progress_bar
        bar.n = trainer.current_epoch * self._steps_per_iteration(trainer)
        bar.set_postfix(self.get_metrics(trainer, pl_module), refresh=False)
        bar.refresh()

    def get_metrics(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        rollout_metrics = getattr(pl_module, "rollout_metrics", {})  # PPOModule's latest rollout
        for name in BAR_METRICS:
            if name in rollout_metrics:
                items[name] = float(rollout_metrics[name])
        return {k: _short(v) if isinstance(v, float) else v for k, v in items.items() if k not in HIDDEN_BAR_METRICS}


def default_callbacks(subcommand: Optional[str], trainer_config: dict[str, Any], callbacks: list) -> list[Callback]:
    """lit_ppo's default callbacks for the CLI, each added only where the config does not bring its own.

    - :class:`EnvStepProgressBar` in place of Lightning's batch counter, unless the bar is off
      (``trainer.enable_progress_bar: false``) or the config names a progress bar.
    - :class:`EpisodeCSVWriter` for ``predict``, unless the config names a prediction writer.
    """
    configured = trainer_config.get("callbacks") or []
    present = [*callbacks, *(configured if isinstance(configured, list) else [configured])]
    added: list[Callback] = []
    bar_on = trainer_config.get("enable_progress_bar") is not False
    if bar_on and not any(isinstance(c, ProgressBar) for c in present):
        added.append(EnvStepProgressBar())
    if subcommand == "predict" and not any(isinstance(c, BasePredictionWriter) for c in present):
        added.append(EpisodeCSVWriter())
    return added


class EpisodeCSVWriter(BasePredictionWriter):
    """Writes the episodes of ``predict`` as CSV rows ``episode,return,length``.

    Each predict batch holds the deterministic episodes of one evaluation (``data.eval_episodes`` of them).

    Args:
        path: the CSV file; ``None``: ``episodes.csv`` in the run's log directory (``trainer.log_dir``). With
            several processes each rank writes its own episodes, to ``<stem>.rank<r>.csv``.
    """

    def __init__(self, path: Optional[str] = None) -> None:
        super().__init__(write_interval="epoch")
        self.path = path

    def setup(self, trainer: "L.Trainer", pl_module: "L.LightningModule", stage: str) -> None:
        # Lightning cannot track batch indices of an IterableDataset; rows are numbered here instead.
        warnings.filterwarnings("ignore", message=".*infer the batch indices.*")

    def write_on_epoch_end(self, trainer: "L.Trainer", pl_module: Any, predictions: Any, batch_indices: Any) -> None:
        path = Path(self.path) if self.path else Path(trainer.log_dir or ".") / "episodes.csv"
        if trainer.world_size > 1:
            path = path.with_name(f"{path.stem}.rank{trainer.global_rank}{path.suffix}")
        rows = []
        for batch in predictions:
            rows += zip(batch["returns"].tolist(), batch["lengths"].tolist())
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["episode", "return", "length"])
            writer.writerows((i, ret, int(length)) for i, (ret, length) in enumerate(rows))
        mean = sum(r for r, _ in rows) / max(len(rows), 1)
        tqdm.write(f"predict: {len(rows)} episodes, return_mean {mean:.2f}, written to {path}")


class EvaluationVideo(Callback):
    """Records deterministic evaluation episodes to an mp4 and hands it to the loggers that take video.

    Recorded every ``every_n_iterations`` rollouts during ``fit`` and once at the end of ``validate`` and
    ``test``. The mp4 (imageio's ffmpeg plugin) is always saved under ``<log_dir>/videos/``; then, by what each
    logger can do: W&B gets it through ``log_video``, TensorBoard through ``add_video`` (needs moviepy<2), MLflow
    as a run artifact; other loggers (CSV) only get the path printed. Needs ``pip install 'lit_ppo[video]'``.

    Args:
        every_n_iterations: record after every n-th rollout during fit; 0: only at validate/test.
        episodes: episodes played one after another into one video (reset seeds ``seed``, ``seed + 1``, ...).
        max_frames: cap on the frames of one video (CartPole's 500-step episode is 10 s at 50 fps).
        fps: frames per second; ``None``: the environment's ``render_fps``.
        seed: reset seed of the first episode.
        tag: the name the video gets in the loggers.
    """

    def __init__(
        self,
        every_n_iterations: int = 100,
        episodes: int = 1,
        max_frames: int = 1000,
        fps: Optional[int] = None,
        seed: int = 0,
        tag: str = "eval/video",
    ) -> None:
        if every_n_iterations < 0 or episodes < 1 or max_frames < 1:
            raise ValueError("EvaluationVideo: every_n_iterations must be >= 0, episodes and max_frames >= 1.")
        self.every_n_iterations, self.episodes, self.max_frames = every_n_iterations, episodes, max_frames
        self.fps, self.seed, self.tag = fps, seed, tag

    def setup(self, trainer: "L.Trainer", pl_module: "L.LightningModule", stage: str) -> None:
        # Fail at start-up, not after an hour of training.
        missing = [name for name in ("imageio", "imageio_ffmpeg", "pygame") if not _module_available(name)]
        if missing:
            raise ModuleNotFoundError(f"EvaluationVideo needs {', '.join(missing)}: pip install 'lit_ppo[video]'")

    def on_train_epoch_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if self.every_n_iterations and (trainer.current_epoch + 1) % self.every_n_iterations == 0:
            self.record(trainer, pl_module, f"iter{trainer.current_epoch + 1:05d}")

    def on_validation_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        if trainer.state.fn == "validate":
            self.record(trainer, pl_module, "validate")

    def on_test_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        self.record(trainer, pl_module, "test")

    def record(self, trainer: "L.Trainer", pl_module: "L.LightningModule", name: str) -> Optional[Path]:
        log_dir = trainer.log_dir or trainer.default_root_dir  # a collective call: every rank makes it
        if not trainer.is_global_zero:
            return None
        frames, returns, fps = self._play(pl_module.acting_policy(), trainer.datamodule.hparams)
        path = Path(log_dir) / "videos" / f"{name}.mp4"
        _write_mp4(path, frames, fps)
        given = [how for logger in trainer.loggers if (how := self._hand_to(logger, path, frames, fps, trainer))]
        returns_text = ", ".join(f"{r:g}" for r in returns)
        tqdm.write(f"evaluation video (return {returns_text}): {path}" + (f" -> {', '.join(given)}" if given else ""))
        return path

    @torch.inference_mode()
    def _play(self, policy, data) -> tuple[np.ndarray, list[float], int]:
        # Classic-control rendering and moviepy.editor call pygame.init(), which probes sound and display
        # devices and complains on a headless machine; recording never plays sound or opens a window.
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        env = make_env(data.env_id, data.get("env_kwargs"), data.get("wrappers"), render_mode="rgb_array")
        obs_space, act_space = env.observation_space, env.action_space
        frames, returns = [], []
        try:
            for episode in range(self.episodes):
                obs, _ = env.reset(seed=self.seed + episode)
                frames.append(env.render())
                total, done = 0.0, False
                while not done and len(frames) < self.max_frames:
                    # The rollout's own conversions, on a batch of one.
                    batch = concatenate(obs_space, [obs], create_empty_array(obs_space, 1))
                    action, _, _ = policy.act(observations_to_tensor(batch, obs_space), deterministic=True)
                    obs, reward, terminated, truncated, _ = env.step(actions_to_env(action, act_space)[0])
                    frames.append(env.render())
                    total, done = total + float(reward), terminated or truncated
                returns.append(total)
            fps = self.fps or int(env.metadata.get("render_fps", 30))
        finally:
            env.close()
        return np.stack(frames), returns, fps

    def _hand_to(self, logger, path: Path, frames: np.ndarray, fps: int, trainer: "L.Trainer") -> Optional[str]:
        """Gives the video to ``logger`` by what it can take; returns how, or None if it takes no media."""
        step = trainer.global_step
        if callable(getattr(logger, "log_video", None)):  # W&B
            logger.log_video(self.tag, [str(path)], step=step)
            return "log_video"
        experiment = logger.experiment
        if callable(getattr(experiment, "add_video", None)):  # TensorBoard's SummaryWriter
            # torch's add_video encodes with moviepy.editor (gone in moviepy 2) and otherwise writes nothing.
            if not _module_available("moviepy.editor"):
                rank_zero_warn("TensorBoard's add_video needs moviepy<2 (pip install 'lit_ppo[video]'): not sent.")
                return None
            # TensorBoard shows an animated GIF, whose encoding time grows with the pixels: a preview at most
            # TB_PREVIEW_WIDTH wide (the mp4 keeps full size).
            stride = -(-frames.shape[2] // TB_PREVIEW_WIDTH)
            preview = np.ascontiguousarray(frames[:, ::stride, ::stride])
            video = torch.from_numpy(preview).permute(0, 3, 1, 2).unsqueeze(0)  # (N, T, C, H, W) uint8
            experiment.add_video(self.tag, video, global_step=step, fps=fps)
            return "add_video"
        if callable(getattr(experiment, "log_artifact", None)) and getattr(logger, "run_id", None):  # MLflow
            experiment.log_artifact(logger.run_id, str(path), artifact_path="videos")
            return "artifact"
        return None


def _module_available(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def _write_mp4(path: Path, frames: np.ndarray, fps: int) -> None:
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    # H.264 in yuv420p needs even sizes; imageio rescales to multiples of macro_block_size, and its default (16)
    # would rescale most renders (CartPole's 600 x 400), 2 only odd ones.
    imageio.mimwrite(path, list(frames), format="FFMPEG", fps=fps, macro_block_size=2)
