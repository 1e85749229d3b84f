"""Which settings a checkpoint file decides (``fit|validate|test|predict --ckpt_path FILE``, with or without the
config it was trained with).

One rule for every setting that changes what a trained policy means: its environment (``data.env_id``, whose
spaces the policy was built for), its network (``model.hidden_sizes``, ``encoder``, ``activation``, ``network``,
``recurrent``), its running statistics (``data.normalize_obs``, ``data.normalize_reward``) and its action masks
(``data.action_masks``):

- **not set** (in no config file and not on the command line): the checkpoint's value is used, said once on stderr;
- **set to the checkpoint's value**: nothing to say;
- **set to another value**: refused before anything runs, naming the setting, both values and the fix.

The other model settings (learning rate, clipping, ...) are replaced by the checkpoint's, as LightningCLI does for
a checkpoint file, and said on stderr. ``--ckpt_path last`` continues this config's own run: the config decides, and
a checkpoint that does not fit it is refused (:func:`lit_ppo.checkpointing.check_compatible`).
"""

from typing import Any, Optional

from lit_ppo.checkpoint_files import CheckpointError
from lit_ppo.checkpointing import ARCHITECTURE_KEYS, check_compatible, plain
from lit_ppo.config_checks import parsed_configs

# Data settings that the policy's meaning depends on, with how a checkpoint's env_spec holds them.
POLICY_DATA_KEYS = ("env_id", "normalize_obs", "normalize_reward", "action_masks")


def explicit_settings(args: Optional[list[str]]) -> set[str]:
    """The dotted keys (``model.recurrent``, ``data.env_id``, ...) that a command line ``args`` sets: on the command
    line itself or in a config file it names (``--config FILE``, a YAML string also works)."""
    keys: set[str] = set()
    for config in parsed_configs(args):
        for section, body in config.items():
            keys.add(str(section))
            keys.update(f"{section}.{key}" for key in (body if isinstance(body, dict) else {}))
    keys.update(str(arg)[2:].partition("=")[0] for arg in args or [] if str(arg).startswith("--"))
    return keys


def _normal(key: str, value: Any) -> Any:
    """A setting as compared (:func:`lit_ppo.checkpointing.plain`), the normalization switches as booleans."""
    return bool(value) if key in ("normalize_obs", "normalize_reward") else plain(value, key)


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
        if key not in saved_spec and key != "action_masks":  # a checkpoint older than the setting
            continue
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
