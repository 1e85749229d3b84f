"""Loading a trained policy for Python code: :func:`load_policy` reads a checkpoint or an exported file into a
:class:`lit_ppo.inference.trained_policy.TrainedPolicy`."""

from pathlib import Path
from typing import Union

import torch

from lit_ppo.checkpointing.files import CheckpointError, check_checkpoint_file, file_kind
from lit_ppo.inference.exported import load_exported_policy
from lit_ppo.inference.trained_policy import TrainedPolicy, env_spaces
from lit_ppo.networks.actor_critic import ActorCritic


def load_policy(path: Union[str, Path], device: Union[str, torch.device] = "cpu") -> TrainedPolicy:
    """The policy of a lit_ppo checkpoint (``last.ckpt``, ``best.ckpt``) or of a file ``lit_ppo export`` wrote
    (``.onnx``, ``.pt``: CPU only, deterministic or stochastic as exported; each told by its content, whatever its
    name), ready to
    :meth:`~TrainedPolicy.predict`, without a Trainer and without importing Lightning. The environment is made once
    to read its spaces (so its package must be importable, as for ``validate``). A file that is not a lit_ppo
    checkpoint raises :class:`lit_ppo.checkpointing.files.CheckpointError`.

    Args:
        path: the checkpoint file ``fit`` wrote.
        device: where the network runs (``"cpu"`` by default).
    """
    # By content, whatever the name (a checkpoint saved as model.pt, an export renamed); by suffix where the
    # content says nothing (then the exported file's loader names what is wrong with it)
    kind = file_kind(path) if Path(path).is_file() else None
    if kind in ("onnx", "torchscript"):
        return load_exported_policy(Path(path), device, kind)
    if kind is None and Path(path).suffix in (".onnx", ".pt") and Path(path).is_file():
        return load_exported_policy(Path(path), device)
    checkpoint = check_checkpoint_file(str(path))
    settings = checkpoint.get("hyper_parameters") or {}
    if "env_spec" not in settings:
        raise CheckpointError(f"{path}: no lit_ppo settings in it (hyper_parameters.env_spec): load a checkpoint "
                              "that `python -m lit_ppo fit` wrote")
    # PPOModule's policy rebuilt as PPOModule builds it, without Lightning: acting needs only the network
    policy = ActorCritic.from_settings(settings)
    prefix = "policy."
    policy.load_state_dict({key[len(prefix):]: value for key, value in checkpoint["state_dict"].items()
                            if key.startswith(prefix)})
    data = dict(checkpoint.get("datamodule_hyper_parameters") or {})
    data.setdefault("env_id", settings["env_spec"]["env_id"])
    observation_space, action_space = env_spaces(data)
    return TrainedPolicy(policy, observation_space, action_space,
                         action_masks=bool(settings["env_spec"].get("action_masks")), device=device)

