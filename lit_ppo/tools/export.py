"""``python -m lit_ppo export --ckpt_path X --format onnx|torchscript [--output F] [--stochastic]``.

Writes the checkpoint's policy as one file that maps a batch of observations to a batch of actions:

- input ``obs``: ``[batch, *observation_shape]``, as the rollout hands observations to the policy
  (:func:`lit_ppo.spaces.observations_to_tensor`): float32 for vector Box spaces (CartPole: ``[batch, 4]``), uint8
  for images, int64 indices for Discrete;
- output ``action``: ``[batch, *action_shape]``: int64 for Discrete (CartPole: ``[batch]``) and MultiDiscrete,
  float32 for Box (the unclipped Gaussian mean: clip to the action space's bounds before stepping).

With invalid-action masks (a policy trained with ``data.action_masks``) the file takes a second input,
``action_mask``: ``[batch, mask_size]`` bool, True = valid (:mod:`lit_ppo.action_masks`), and picks (or samples)
valid actions only.

It is the ActorCritic's own ``act`` path, so observation normalization (running statistics saved with the
policy) is folded in. Deterministic by default (the distribution's mode); ``--stochastic`` samples instead.
The batch axis is dynamic. After writing, the file is loaded back and checked against the checkpoint's policy.
"""

import argparse
import sys
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor, nn

from lit_ppo.errors import ConfigError

FORMATS = {"onnx": ".onnx", "torchscript": ".pt"}


class ExportError(Exception):
    """A problem with the user's input, reported as one line without a traceback."""


class DeployedPolicy(nn.Module):
    """Observations (and action masks, where the policy was trained with them) to actions through
    :meth:`lit_ppo.networks.ActorCritic.act`, with nothing else in the way."""

    def __init__(self, policy: nn.Module, deterministic: bool = True) -> None:
        super().__init__()
        self.policy, self.deterministic = policy, deterministic

    def forward(self, obs: Tensor, action_mask: Optional[Tensor] = None) -> Tensor:
        action, _, _ = self.policy.act(obs, deterministic=self.deterministic, action_mask=action_mask)
        return action


def load_policy(ckpt_path: Path):
    """The checkpoint's ``ActorCritic`` (CPU, eval mode), a batch of 2 example observations of its env, and example
    action masks (None for a policy trained without them)."""
    if not ckpt_path.is_file():
        raise ExportError(f"checkpoint not found: {ckpt_path}")
    from lit_ppo.module import PPOModule

    try:
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        module = PPOModule.load_from_checkpoint(ckpt_path, map_location="cpu")
    except Exception as err:
        raise ExportError(f"{ckpt_path}: not a lit_ppo checkpoint ({type(err).__name__}: {err})") from err
    data = checkpoint.get("datamodule_hyper_parameters") or {}
    env_id = data.get("env_id") or module.hparams.env_spec["env_id"]
    policy = module.policy.eval()
    example = example_observations(env_id, data.get("env_kwargs"), data.get("wrappers"),
                                   vectorization=data.get("vectorization", "sync"), num_envs=data.get("num_envs", 1))
    mask = None
    if module.hparams.env_spec.get("action_masks"):
        # Row 0 allows everything, row 1 all but the first choice of each component: the check sees masks at work.
        mask = torch.ones((example.shape[0], policy.head.mask_size), dtype=torch.bool)
        mask[1, 0] = False
    return policy, example, mask


def example_observations(env_id: str, env_kwargs=None, wrappers=None, batch: int = 2, vectorization="sync",
                         num_envs: int = 1) -> Tensor:
    """Observations sampled from the env's space, converted exactly as rollouts convert them; the space is that of
    the vector env training used where it was not sync/async (EnvPool, a user's factory: no gymnasium id needed)."""
    from lit_ppo.envs import make_env, make_vector_env
    from lit_ppo.spaces import batch_observations

    if vectorization in ("sync", "async"):
        env = make_env(env_id, env_kwargs, wrappers)
        space = env.observation_space
    else:
        env = make_vector_env(env_id, num_envs, vectorization, env_kwargs, wrappers)
        space = env.single_observation_space
    env.close()
    space.seed(0)
    samples = [space.sample() for _ in range(batch)]  # batch >= 2: torch.export specializes a batch of 1
    return batch_observations(samples, space)


def export_onnx(model: DeployedPolicy, example: Tensor, output: Path, mask: Optional[Tensor] = None) -> None:
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401  (torch's ONNX exporter translates with it)
    except ImportError as err:
        raise ExportError(f"ONNX export needs onnx and onnxscript ({err}): pip install 'lit_ppo[export]'") from None
    batch = torch.export.Dim("batch")
    inputs, names, shapes = (example,), ["obs"], {"obs": {0: batch}}
    if mask is not None:
        inputs, names, shapes = (example, mask), ["obs", "action_mask"], {"obs": {0: batch}, "action_mask": {0: batch}}
    torch.onnx.export(
        model, inputs, str(output), input_names=names, output_names=["action"], dynamic_shapes=shapes,
        external_data=False,  # one self-contained file; a policy is far below ONNX's 2 GB limit
        verbose=False,
    )


def export_torchscript(model: DeployedPolicy, example: Tensor, output: Path, mask: Optional[Tensor] = None) -> None:
    # Tracing records the ops run on the example; the heads' Python branching is fixed by then. A sampled
    # (stochastic) output differs between runs by design, so the tracer's self-check is off for it.
    inputs = (example,) if mask is None else (example, mask)
    traced = torch.jit.trace(model, inputs, check_trace=model.deterministic)
    traced.save(str(output))


def run_exported(path: Path, fmt: str, obs: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """Actions from the exported file (for the check after writing)."""
    if fmt == "torchscript":
        return torch.jit.load(str(path))(obs) if mask is None else torch.jit.load(str(path))(obs, mask)
    try:
        import onnxruntime
    except ImportError:
        return None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {"obs": obs.numpy()} if mask is None else {"obs": obs.numpy(), "action_mask": mask.numpy()}
    return torch.from_numpy(session.run(["action"], feeds)[0])


def export(ckpt_path: Path, fmt: str, output: Path, deterministic: bool = True) -> str:
    """Writes the policy to ``output``; returns a one-line description of its input and output."""
    policy, example, mask = load_policy(ckpt_path)
    model = DeployedPolicy(policy, deterministic).eval()
    with torch.no_grad():
        expected = model(example, mask)
        output.parent.mkdir(parents=True, exist_ok=True)
        (export_onnx if fmt == "onnx" else export_torchscript)(model, example, output, mask)
        if deterministic:
            got = run_exported(output, fmt, example, mask)
            if got is not None and not torch.allclose(got.to(expected.dtype), expected, atol=1e-5):
                raise ExportError(f"{output}: exported actions {got} differ from the checkpoint's {expected}")
    shape = ", ".join(["batch", *map(str, example.shape[1:])])
    action_shape = ", ".join(["batch", *map(str, expected.shape[1:])])
    masks = "" if mask is None else f", 'action_mask' bool [batch, {mask.shape[1]}]"
    return (f"input 'obs' {str(example.dtype).removeprefix('torch.')} [{shape}]{masks} -> "
            f"output 'action' {str(expected.dtype).removeprefix('torch.')} [{action_shape}]")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lit_ppo export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt_path", type=Path, required=True, help="a checkpoint written by fit")
    parser.add_argument("--format", choices=sorted(FORMATS), required=True)
    parser.add_argument("--output", type=Path, help="file to write (default: the checkpoint's path, .onnx or .pt)")
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of taking the mode")
    args = parser.parse_args(argv)
    output = args.output or args.ckpt_path.with_suffix(FORMATS[args.format])
    try:
        signature = export(args.ckpt_path, args.format, output, deterministic=not args.stochastic)
    except (ExportError, ConfigError) as err:
        print(f"lit_ppo export: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {output} ({args.format}, {'stochastic' if args.stochastic else 'deterministic'}): {signature}")
    return 0
