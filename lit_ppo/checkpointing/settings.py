"""Which settings a checkpoint file decides (``fit|validate|test|predict --ckpt_path FILE``, with or without the
config it was trained with).

One rule for every setting that changes what a trained policy means: its environment (``data.env_id``, whose
spaces the policy was built for), its network (``model.hidden_sizes``, ``encoder``, ``activation``, ``network``,
``recurrent``), its running statistics (``data.normalize_obs``, ``data.normalize_reward``, ``data.return_scaling``,
compared as they apply) and its action masks (``data.action_masks``):

- **not set** (in no config file and not on the command line): the checkpoint's value is used, said once on stderr;
- **set to the checkpoint's value**: nothing to say;
- **set to another value**: refused before anything runs, naming the setting, both values and the fix.

The other model settings (learning rate, clipping, ...) are replaced by the checkpoint's, as LightningCLI does for
a checkpoint file, and said on stderr. ``--ckpt_path last`` continues this config's own run: the config decides, and
a checkpoint that does not fit it is refused (:func:`check_compatible`).
"""

from typing import Any

from lit_ppo.checkpointing.files import CheckpointError
from lit_ppo.networks.recurrent import RecurrentConfig

# Model settings that decide the network's shape: a checkpoint loads only into the same ones.
ARCHITECTURE_KEYS = {"hidden_sizes": "hidden sizes", "encoder": "encoder", "activation": "activation",
                     "network": "network", "recurrent": "recurrent core"}

# Data settings that the policy's meaning depends on, with how a checkpoint's env_spec holds them.
POLICY_DATA_KEYS = ("env_id", "normalize_obs", "normalize_reward", "return_scaling", "action_masks")
# The switches of running statistics: compared as booleans, absent (older checkpoints) meaning off.
SCALING_KEYS = ("normalize_obs", "normalize_reward", "return_scaling")


def plain(value: Any, key: str = "") -> Any:
    """A setting as compared: sequences as lists, and ``model.recurrent`` parsed (``true`` is its defaults)."""
    if key == "recurrent":
        return RecurrentConfig.parse(value)
    return list(value) if isinstance(value, (list, tuple)) else value


def check_compatible(saved: dict[str, Any], current: dict[str, Any], path: str = "the checkpoint") -> None:
    """Compare a checkpoint's model hyperparameters with this run's and name every mismatch of shape."""
    problems = []
    saved_spec, spec = saved.get("env_spec") or {}, current.get("env_spec") or {}
    for key, label in (("env_id", "environment"), ("observation", "observation space"), ("action", "action space"),
                       ("normalize_obs", "data.normalize_obs"), ("normalize_reward", "data.normalize_reward"),
                       ("return_scaling", "data.return_scaling"), ("action_masks", "data.action_masks")):
        was, now = saved_spec.get(key), spec.get(key)
        if key in SCALING_KEYS:  # older checkpoints: absent means off
            was, now = bool(was), bool(now)
        if was != now:
            problems.append(f"{label}: checkpoint {was!r}, this run {now!r}")
    for key, label in ARCHITECTURE_KEYS.items():
        was, now = plain(saved.get(key), key), plain(current.get(key), key)
        if was != now:
            problems.append(f"{label} (model.{key}): checkpoint {was!r}, this run {now!r}")
    if problems:
        raise CheckpointError(f"ckpt_path: {path} does not fit this run: " + "; ".join(problems)
                              + ". Use the config the checkpoint was trained with (its config.yaml is next to the "
                              "logs), or a checkpoint of this environment and network.")


def _normal(key: str, value: Any) -> Any:
    """A setting as compared (:func:`plain`), the normalization switches as booleans."""
    return bool(value) if key in SCALING_KEYS else plain(value, key)


def model_settings_from_checkpoint(saved: dict[str, Any], requested: dict[str, Any], explicit: set[str],
                                   path: str) -> list[str]:
    """The model settings ``requested`` that the checkpoint's hyperparameters ``saved`` replace, as
    ``"model.key: <checkpoint's> (not <requested>)"``; an architecture setting set explicitly to another value is
    refused (with :func:`check_compatible`'s message)."""
    differs = {key: requested[key] for key in ARCHITECTURE_KEYS if key in requested and key in saved
               and f"model.{key}" in explicit and _normal(key, requested[key]) != _normal(key, saved[key])}
    check_compatible(saved, {**saved, **differs}, path)
    return [f"model.{key}: {_normal(key, saved[key])!r} (not {_normal(key, requested[key])!r})"
            for key in sorted(saved) if key in requested and key != "env_spec"
            and _normal(key, saved[key]) != _normal(key, requested[key])]


def data_settings_from_checkpoint(saved_spec: dict[str, Any], requested: dict[str, Any], explicit: set[str],
                                  path: str) -> dict[str, Any]:
    """The data settings the checkpoint (its ``env_spec``) decides, by the rule above: ``{key: checkpoint's}`` for
    each one not set that differs; one set to another value is refused, the environment first."""
    taken = {}
    for key in POLICY_DATA_KEYS:
        if key not in saved_spec and key not in SCALING_KEYS and key != "action_masks":  # older than the setting
            continue  # (an absent scaling switch means off: the defaults may since have turned one on)
        was, now = _normal(key, saved_spec.get(key)), _normal(key, requested.get(key))
        if was == now:
            continue
        if f"data.{key}" in explicit:
            if key == "env_id":
                raise CheckpointError(f"ckpt_path: {path} was trained on {was!r}, and this run sets data.env_id "
                                      f"{now!r}. Use a checkpoint of {now!r}, or drop data.env_id (and the config "
                                      f"of another environment) to use the checkpoint's.")
            raise CheckpointError(f"ckpt_path: {path} was trained with data.{key}: {was!r}, and this run sets "
                                  f"{now!r}; the trained policy's meaning comes with that setting. Drop --data.{key} "
                                  f"(the checkpoint's is then used) or set it to {was!r}.")
        taken[key] = was
    return taken
