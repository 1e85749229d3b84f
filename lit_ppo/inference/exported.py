"""Files ``lit_ppo export`` wrote (ONNX, TorchScript) as policies: run through onnxruntime or torch on the CPU, with
the environment's spaces read from the file's metadata (:mod:`lit_ppo.tools.export` writes them)."""

import json
from pathlib import Path
from typing import Callable, Optional, Union

import torch
from torch import Tensor

from lit_ppo.checkpointing.files import CheckpointError
from lit_ppo.inference.trained_policy import TrainedPolicy, env_spaces


def load_exported(path: Path, fmt: str) -> Optional[Callable[..., list[Tensor]]]:
    """The exported file as a function of its inputs (in the file's order) returning its outputs, or None where
    onnxruntime is missing."""
    if fmt == "torchscript":
        module = torch.jit.load(str(path))

        def run_module(*inputs: Tensor) -> list[Tensor]:
            outputs = module(*inputs)
            return list(outputs) if isinstance(outputs, tuple) else [outputs]
        return run_module
    try:
        import onnxruntime
    except ImportError:
        return None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda *inputs: [torch.from_numpy(out) for out in session.run(
        None, {name: value.numpy() for name, value in zip(names, inputs)})]



class ExportedPolicy:
    """What a :class:`TrainedPolicy` acts with for a file ``lit_ppo export`` wrote: ``act`` runs the file (ONNX
    through onnxruntime, TorchScript through torch), on the CPU. The file is deterministic or stochastic as it was
    exported, and takes its masks and state as inputs (:mod:`lit_ppo.tools.export`)."""

    def __init__(self, run: Callable[..., list[torch.Tensor]], state_size: int, deterministic: bool) -> None:
        self.run, self.state_size, self.deterministic = run, state_size, deterministic

    def to(self, device: torch.device) -> "ExportedPolicy":
        if torch.device(device).type != "cpu":
            raise ValueError("an exported file acts on the CPU here; load the checkpoint for another device")
        return self

    def eval(self) -> "ExportedPolicy":
        return self

    def initial_state(self, n: int) -> Optional[torch.Tensor]:
        return torch.zeros((n, self.state_size)) if self.state_size else None

    def act(self, obs: torch.Tensor, deterministic: bool = False, action_mask: Optional[torch.Tensor] = None,
            state: Optional[torch.Tensor] = None, starts: Optional[torch.Tensor] = None):
        if deterministic != self.deterministic:
            kind = "deterministic (the mode)" if self.deterministic else "stochastic (samples)"
            raise ValueError(f"this file was exported {kind}: call predict(..., deterministic={self.deterministic}), "
                             "or export again (--stochastic for samples)")
        inputs = [obs]
        if self.state_size:  # the file's caller zeroes the state where an episode starts, as the policy would
            inputs.append(state if starts is None else state * (~starts).unsqueeze(-1).to(state.dtype))
        if action_mask is not None:
            inputs.append(action_mask)
        outputs = self.run(*inputs)
        return outputs[0], None, None, (outputs[1] if self.state_size else None)


def load_exported_policy(path: Path, device: Union[str, torch.device] = "cpu",
                         fmt: Optional[str] = None) -> TrainedPolicy:
    """A file ``lit_ppo export`` wrote (``.onnx``, ``.pt``) as a :class:`TrainedPolicy`: its metadata names the
    environment, whose spaces convert the observations and actions as for a checkpoint. ``fmt``: ``onnx`` or
    ``torchscript`` (None: by the suffix)."""
    fmt = fmt or ("onnx" if path.suffix == ".onnx" else "torchscript")
    try:
        if fmt == "onnx":
            import onnx

            props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
            text = props.get("lit_ppo")
        else:
            buffer = getattr(torch.jit.load(str(path)), "lit_ppo", None)
            text = None if buffer is None else bytes(buffer.tolist()).decode()
        run = load_exported(path, fmt)
    except Exception as err:
        raise CheckpointError(f"{path}: not a file lit_ppo export wrote ({type(err).__name__}: {err})") from None
    if text is None or run is None:
        raise CheckpointError(f"{path}: no lit_ppo metadata (exported before 2026-12-02, or by other tools), or "
                              "onnxruntime is missing; export the checkpoint again, or load the checkpoint itself")
    meta = json.loads(text)
    observation_space, action_space = env_spaces({k: v for k, v in meta["data"].items() if v is not None})
    actor = ExportedPolicy(run, int(meta["state_size"]), bool(meta["deterministic"]))
    return TrainedPolicy(actor, observation_space, action_space, action_masks=bool(meta["action_masks"]),
                         device=device)
