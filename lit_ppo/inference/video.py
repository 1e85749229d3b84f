"""Evaluation videos: deterministic episodes rendered to an mp4 and handed to the loggers that take video.

Only Lightning and lit_ppo are imported here; the video libraries (imageio, moviepy, pygame) are imported when a
video is recorded, so ``fit`` without :class:`EvaluationVideo` never needs them.
"""

import importlib.util
import os
from pathlib import Path
from typing import Optional

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from tqdm import tqdm  # tqdm.write: a line printed above any open progress bar

from lit_ppo.collection.acting import cpu_copy
from lit_ppo.envs.make import make_env
from lit_ppo.envs.spaces import actions_to_env, batch_observations

TB_PREVIEW_WIDTH = 320


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
        # A CPU copy of the learner's policy (the module's public `policy`), whatever device it trains on.
        frames, returns, fps = self._play(cpu_copy(pl_module.policy, None), trainer.datamodule.hparams)
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
                state = policy.initial_state(1)  # a recurrent policy's memory, new each episode (None: none)
                while not done and len(frames) < self.max_frames:
                    # The rollout's own conversions, on a batch of one.
                    action, _, _, state = policy.act(batch_observations([obs], obs_space), deterministic=True,
                                                     state=state)
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
        step = getattr(trainer.lightning_module, "env_steps", trainer.global_step)  # lit_ppo's step axis: env steps
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
