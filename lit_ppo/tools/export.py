"""``python -m lit_ppo export --ckpt_path X --format onnx|torchscript [--output F] [--stochastic]``.

Writes the checkpoint's policy as one file that maps a batch of observations to a batch of actions:

- input ``obs``: ``[batch, *observation_shape]``, as the rollout hands observations to the policy
  (:func:`lit_ppo.envs.spaces.observations_to_tensor`): float32 for vector Box spaces (CartPole: ``[batch, 4]``), uint8
  for images, int64 indices for Discrete;
- output ``action``: ``[batch, *action_shape]``: int64 for Discrete (CartPole: ``[batch]``) and MultiDiscrete,
  float32 for Box (the unclipped Gaussian mean: clip to the action space's bounds before stepping).

With invalid-action masks (a policy trained with ``data.action_masks``) the file takes a second input,
``action_mask``: ``[batch, mask_size]`` bool, True = valid (:mod:`lit_ppo.collection.action_masks`), and picks (or samples)
valid actions only.

A recurrent policy (``model.recurrent``) takes and returns its memory: input ``state`` ``[batch, state_size]``
float32 (zeros at an episode's first step) after ``obs``, and output ``next_state``, the next step's input,
after ``action``. The check after writing then plays a whole episode with the file and the checkpoint side by side.

It is the ActorCritic's own ``act`` path, so observation normalization (running statistics saved with the
policy) is folded in. Deterministic by default (the distribution's mode); ``--stochastic`` samples instead.
The batch axis is dynamic. After writing, the file is loaded back and checked against the checkpoint's policy.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from lit_ppo.errors import ConfigError
from lit_ppo.inference.exported import load_exported
from lit_ppo.tools.outputs import check_output, replacing

FORMATS = {"onnx": ".onnx", "torchscript": ".pt"}
SINGLE = ("sync", "async")  # vectorizations whose env id makes one gymnasium env (for the episode check)


class ExportError(Exception):
    """A problem with the user's input, reported as one line without a traceback."""


class DeployedPolicy(nn.Module):
    """Observations (and action masks, where the policy was trained with them) to actions through
    :meth:`lit_ppo.networks.actor_critic.ActorCritic.act`, with nothing else in the way."""

    def __init__(self, policy: nn.Module, deterministic: bool = True) -> None:
        super().__init__()
        self.policy, self.deterministic = policy, deterministic

    def forward(self, obs: Tensor, action_mask: Optional[Tensor] = None) -> Tensor:
        action, _, _, _ = self.policy.act(obs, deterministic=self.deterministic, action_mask=action_mask)
        return action


class DeployedRecurrentPolicy(DeployedPolicy):
    """A recurrent policy: ``(obs, state[, action_mask]) -> (action, state)``; the caller zeroes ``state`` at an
    episode's first step (the policy's own rule, :mod:`lit_ppo.networks.recurrent`)."""

    def forward(self, obs: Tensor, state: Tensor, action_mask: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        action, _, _, state = self.policy.act(obs, deterministic=self.deterministic, action_mask=action_mask,
                                              state=state)
        return action, state


def deployed(policy: nn.Module, deterministic: bool = True) -> DeployedPolicy:
    return (DeployedRecurrentPolicy if policy.state_size else DeployedPolicy)(policy, deterministic).eval()


def load_for_export(ckpt_path: Path):
    """The checkpoint's ``ActorCritic`` (CPU, eval mode), a batch of 2 example observations of its env, example
    action masks (None for a policy trained without them) and the data settings it was trained with."""
    if not ckpt_path.is_file():
        raise ExportError(f"checkpoint not found: {ckpt_path}")
    from lit_ppo.checkpointing.files import check_checkpoint_file
    from lit_ppo.learning.module import PPOModule

    check_checkpoint_file(str(ckpt_path))  # a file that is no checkpoint is named in one line

    try:
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        module = PPOModule.load_from_checkpoint(ckpt_path, map_location="cpu")
    except Exception as err:
        raise ExportError(f"{ckpt_path}: not a lit_ppo checkpoint ({type(err).__name__}: {err})") from err
    data = dict(checkpoint.get("datamodule_hyper_parameters") or {})
    data.setdefault("env_id", module.hparams.env_spec["env_id"])
    policy = module.policy.eval()
    example = example_observations(data)
    mask = None
    if module.hparams.env_spec.get("action_masks"):
        # Row 0 allows everything, row 1 all but the first choice of each component: the check sees masks at work.
        mask = torch.ones((example.shape[0], policy.head.mask_size), dtype=torch.bool)
        mask[1, 0] = False
    return policy, example, mask, data


def example_observations(data: dict, batch: int = 2) -> Tensor:
    """Observations sampled from the space of the environment of the data settings ``data`` (the one
    :func:`lit_ppo.load_policy` reads), converted exactly as rollouts convert them."""
    from lit_ppo.inference.trained_policy import env_spaces
    from lit_ppo.envs.spaces import batch_observations

    space, _ = env_spaces(data)
    space.seed(0)
    samples = [space.sample() for _ in range(batch)]  # batch >= 2: torch.export specializes a batch of 1
    return batch_observations(samples, space)


def model_inputs(model: DeployedPolicy, obs: Tensor, mask: Optional[Tensor] = None,
                 state: Optional[Tensor] = None) -> dict[str, Tensor]:
    """The file's inputs by name, in its order (a recurrent policy's zero state where none is given)."""
    inputs = {"obs": obs}
    if isinstance(model, DeployedRecurrentPolicy):
        inputs["state"] = state if state is not None else model.policy.initial_state(obs.shape[0])
    if mask is not None:
        inputs["action_mask"] = mask
    return inputs


def output_names(model: DeployedPolicy) -> list[str]:
    return ["action", "next_state"] if isinstance(model, DeployedRecurrentPolicy) else ["action"]


def export_onnx(model: DeployedPolicy, example: Tensor, output: Path, mask: Optional[Tensor] = None,
                metadata: str = "{}") -> None:
    try:
        import onnx
        import onnxscript  # noqa: F401  (torch's ONNX exporter translates with it)
    except ImportError as err:
        raise ExportError(f"ONNX export needs onnx and onnxscript ({err}): pip install 'lit_ppo[export]'") from None
    batch = torch.export.Dim("batch")
    inputs = model_inputs(model, example, mask)
    torch.onnx.export(
        model, tuple(inputs.values()), str(output), input_names=list(inputs), output_names=output_names(model),
        dynamic_shapes={name: {0: batch} for name in inputs},
        external_data=False,  # one self-contained file; a policy is far below ONNX's 2 GB limit
        verbose=False,
    )
    written = onnx.load(str(output))
    onnx.helper.set_model_props(written, {"lit_ppo": metadata})
    onnx.save(written, str(output))


def describe(data: dict, policy: nn.Module, masked: bool, deterministic: bool) -> str:
    """What :func:`lit_ppo.load_policy` needs to act with the file (the environment's settings, for its spaces),
    as JSON: kept in the file (ONNX metadata ``lit_ppo``; TorchScript buffer ``lit_ppo``, UTF-8 bytes)."""
    keys = ("env_id", "env_kwargs", "wrappers", "vectorization", "num_envs")
    return json.dumps({"data": {key: data.get(key) for key in keys}, "state_size": policy.state_size,
                       "action_masks": masked, "deterministic": deterministic}, default=str)


def export_torchscript(model: DeployedPolicy, example: Tensor, output: Path, mask: Optional[Tensor] = None,
                       metadata: str = "{}") -> None:
    # Tracing records the ops run on the example; the heads' Python branching is fixed by then. A sampled
    # (stochastic) output differs between runs by design, so the tracer's self-check is off for it.
    model.register_buffer("lit_ppo", torch.tensor(list(metadata.encode()), dtype=torch.uint8))
    inputs = tuple(model_inputs(model, example, mask).values())
    traced = torch.jit.trace(model, inputs, check_trace=model.deterministic)
    traced.save(str(output))


def run_exported(path: Path, fmt: str, obs: Tensor, mask: Optional[Tensor] = None, state: Optional[Tensor] = None):
    """Actions from the exported file (for the check after writing), or None where onnxruntime is missing; given a
    recurrent policy's ``state``, ``(actions, state)``."""
    run = load_exported(path, fmt)
    if run is None:
        return None
    inputs = [obs] + ([] if state is None else [state]) + ([] if mask is None else [mask])
    outputs = run(*inputs)
    return outputs[0] if state is None else tuple(outputs)


def export(ckpt_path: Path, fmt: str, output: Path, deterministic: bool = True) -> str:
    """Writes the policy to ``output``; returns a one-line description of its input and output. The file is
    written beside ``output`` and replaces it once checked: a failed export leaves an earlier file as it was."""
    policy, example, mask, data = load_for_export(ckpt_path)
    model = deployed(policy, deterministic)
    with torch.no_grad(), replacing(output, "--output") as written:
        inputs = model_inputs(model, example, mask)
        expected = model(*inputs.values())
        metadata = describe(data, policy, mask is not None, deterministic)
        (export_onnx if fmt == "onnx" else export_torchscript)(model, example, written, mask, metadata)
        run = load_exported(written, fmt) if deterministic else None
        if run is not None and policy.state_size and mask is None and data.get("vectorization", "sync") in SINGLE:
            check_episode(model, run, output, data)
        elif run is not None:
            got, want = run(*inputs.values()), expected if policy.state_size else (expected,)
            if not all(torch.allclose(g.to(w.dtype), w, atol=1e-5) for g, w in zip(got, want)):
                raise ExportError(f"{output}: exported outputs {got} differ from the checkpoint's {want}")
    action = expected[0] if policy.state_size else expected
    shape = ", ".join(["batch", *map(str, example.shape[1:])])
    action_shape = ", ".join(["batch", *map(str, action.shape[1:])])
    state, next_state = (f", '{name}' float32 [batch, {policy.state_size}]" if policy.state_size else ""
                         for name in ("state", "next_state"))
    masks = "" if mask is None else f", 'action_mask' bool [batch, {mask.shape[1]}]"
    return (f"input 'obs' {str(example.dtype).removeprefix('torch.')} [{shape}]{state}{masks} -> "
            f"output 'action' {str(action.dtype).removeprefix('torch.')} [{action_shape}]{next_state}")


def check_episode(model: DeployedRecurrentPolicy, run: Callable[..., list[Tensor]], output: Path, data: dict,
                  max_steps: int = 1000) -> None:
    """A recurrent policy's file against the checkpoint over one whole episode (actions and states at every step;
    the checkpoint's actions step the env): the carried state is checked, not only one step."""
    from lit_ppo.envs.make import make_env
    from lit_ppo.envs.spaces import actions_to_env, batch_observations

    env = make_env(data["env_id"], data.get("env_kwargs"), data.get("wrappers"))
    try:
        obs, _ = env.reset(seed=0)
        state = got_state = model.policy.initial_state(1)
        for step in range(max_steps):
            x = batch_observations([obs], env.observation_space)
            action, state = model(x, state)
            got_action, got_state = run(x, got_state)
            if not (torch.allclose(got_action.to(action.dtype), action, atol=1e-5)
                    and torch.allclose(got_state, state, atol=1e-4)):
                raise ExportError(f"{output}: at step {step} of an episode the exported policy's action or state "
                                  f"differs from the checkpoint's ({got_action} vs {action})")
            obs, _, terminated, truncated, _ = env.step(actions_to_env(action, env.action_space)[0])
            if terminated or truncated:
                return
    finally:
        env.close()


def default_output(ckpt_path: Path, fmt: str) -> Path:
    """The checkpoint's path with the format's suffix, unless that is the checkpoint itself (one saved as
    ``model.pt``): then ``model-policy.pt``."""
    output = ckpt_path.with_suffix(FORMATS[fmt])
    return ckpt_path.with_name(f"{ckpt_path.stem}-policy{FORMATS[fmt]}") if output == ckpt_path else output


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lit_ppo export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt_path", type=Path, required=True, help="a checkpoint written by fit")
    parser.add_argument("--format", choices=sorted(FORMATS), required=True)
    parser.add_argument("--output", type=Path, help="file to write (default: the checkpoint's path, .onnx or .pt; "
                        "<name>-policy.pt where that is the checkpoint itself); never an existing checkpoint")
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of taking the mode")
    args = parser.parse_args(argv)
    output = args.output or default_output(args.ckpt_path, args.format)
    try:
        check_output(output, "--output", [args.ckpt_path])  # before the export's work, and before anything is written
        signature = export(args.ckpt_path, args.format, output, deterministic=not args.stochastic)
    except (ExportError, ConfigError) as err:
        print(f"lit_ppo export: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {output} ({args.format}, {'stochastic' if args.stochastic else 'deterministic'}): {signature}")
    return 0
