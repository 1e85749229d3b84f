"""Building the environments that rollouts play.

``data.env_id`` is one of:

- a registered gymnasium id (``Pendulum-v1``);
- gymnasium's ``module:Id`` form (``ale_py:ALE/Breakout-v5``): the module is imported, which registers the id;
- an entry point ``module:Attribute`` (``my_pkg.envs:MyEnv``): a ``gymnasium.Env`` class, or a function returning
  one, that nobody registered; the module is imported from the config.

``data.wrappers`` is a list of gymnasium wrappers applied in order to each environment, each a class path or
``{class_path: ..., init_args: {...}}``. The spaces become typed specs once (:mod:`lit_ppo.envs.env_spec`, as plain
data for checkpoints); observations and actions cross between envs and policy in :mod:`lit_ppo.envs.spaces`.
"""

import functools
import importlib
import warnings
from collections.abc import Sequence
from typing import Any, Optional, Union

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

from lit_ppo.classpath import ClassPathConfig, resolve
from lit_ppo.errors import ConfigError
from lit_ppo.envs.processes import in_worker
from lit_ppo.envs.stagger import StaggeredStart, first_episode_limit, refusal

VECTORIZATION_MODES = ("sync", "async", "native", "envpool")
WrapperConfig = ClassPathConfig
Vectorization = Union[str, dict[str, Any]]  # one of VECTORIZATION_MODES, or a factory's class path config


# -- making environments ----------------------------------------------------------------------------------------
def _resolve_env_id(env_id: str) -> Union[str, EnvSpec]:
    """A registered id as it is; ``module:Name`` imports the module, then means the id ``Name`` if that import
    registered it (gymnasium's convention), else the entry point ``module.Name``."""
    if ":" not in env_id:
        return env_id
    module_name, name = env_id.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except Exception as err:
        raise ConfigError(
            f"data.env_id: {env_id!r}: cannot import module {module_name!r}: {type(err).__name__}: {err}"
        ) from err
    if name in gym.registry:
        return name
    target: Any = module
    for part in name.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise ConfigError(
            f"data.env_id: {env_id!r}: module {module_name!r} has no environment class or function {name!r}, "
            f"and no environment id {name!r} is registered."
        )
    return EnvSpec(id=name.rsplit(".", 1)[-1], entry_point=target)


def make_env(
    env_id: str,
    env_kwargs: Optional[dict[str, Any]] = None,
    wrappers: Optional[Sequence[WrapperConfig]] = None,
    **kwargs: Any,
) -> gym.Env:
    """One environment: ``gymnasium.make`` (or the entry point) with ``env_kwargs``, then ``wrappers`` in order.

    Every failure is a :class:`ConfigError` naming the id or the wrapper and what went wrong.
    """
    resolved = _resolve_env_id(env_id)
    try:
        env = gym.make(resolved, **(env_kwargs or {}), **kwargs)
    except gym.error.DependencyNotInstalled as err:  # its message names the pip extra
        raise ConfigError(f"data.env_id: cannot make environment {env_id!r}: {err}") from None
    except gym.error.Error as err:
        raise ConfigError(
            f"data.env_id: cannot make environment {env_id!r}: {err}. Use a registered id (list them with "
            "`python -c 'import gymnasium; gymnasium.pprint_registry()'`) or an entry point 'my_pkg.envs:MyEnv'."
        ) from None
    except Exception as err:
        raise ConfigError(f"data.env_id: cannot make environment {env_id!r}: {type(err).__name__}: {err}") from err
    for index, config in enumerate(wrappers or []):
        class_path, wrap = resolve(config, f"data.wrappers[{index}]")
        try:
            env = wrap(env)
        except Exception as err:
            env.close()
            raise ConfigError(
                f"data.wrappers[{index}]: {class_path} cannot wrap {env_id!r}: {type(err).__name__}: {err}"
            ) from err
    return env


def make_staggered_env(env_id: str, env_kwargs: Optional[dict[str, Any]], wrappers: Sequence[WrapperConfig],
                       index: int, total_envs: int, **kwargs: Any) -> gym.Env:
    """:func:`make_env`, with its first episode cut short as environment ``index`` of ``total_envs``
    (:mod:`lit_ppo.envs.stagger`) when its time limit is known (``env.spec.max_episode_steps``)."""
    env = make_env(env_id, env_kwargs, wrappers, **kwargs)
    limit = env.spec.max_episode_steps if env.spec is not None else None
    steps = first_episode_limit(limit, index, total_envs)
    return env if steps is None or steps == limit else StaggeredStart(env, steps)


def make_vector_env(
    env_id: str,
    num_envs: int,
    vectorization: Vectorization = "sync",
    env_kwargs: Optional[dict[str, Any]] = None,
    wrappers: Optional[Sequence[WrapperConfig]] = None,
    seed: Optional[int] = None,
    stagger: Optional[tuple[int, int]] = None,
    **make_kwargs: Any,
) -> gym.vector.VectorEnv:
    """``num_envs`` environments as one vector env, with gymnasium's episode statistics on top. ``seed`` matters
    to EnvPool only, which is seeded when it is made (the others are seeded by their first reset). ``stagger``
    (``(first_index, total_envs)``: these environments' place among all ranks') cuts each environment's first
    episode short by a different number of steps (``data.stagger_episodes``, :mod:`lit_ppo.envs.stagger`); sync and
    async only.

    ``vectorization`` (``data.vectorization``):

    - ``sync`` / ``async``: :func:`make_env` environments in ``SyncVectorEnv`` / ``AsyncVectorEnv`` with same-step
      autoreset (the final observation of a truncated episode arrives in ``info["final_obs"]``); ``wrappers``
      wrap each environment;
    - ``native``: the environment's own vector implementation (``gymnasium.make_vec(env_id,
      vectorization_mode="vector_entry_point")``, e.g. ``CartPoleVectorEnv``: all environments in one numpy call);
    - ``envpool``: ``envpool.make(env_id, env_type="gymnasium")`` (optional: ``pip install 'lit_ppo[envpool]'``);
    - a class path (or ``{class_path, init_args}``) of a function or class that returns a
      ``gymnasium.vector.VectorEnv`` when called with ``num_envs=...`` and the ``init_args``.

    For the last three, ``wrappers`` must be vector wrappers (``gymnasium.vector.VectorWrapper`` subclasses, such as
    ``gymnasium.wrappers.vector.NormalizeObservation``) and wrap the vector env. Whatever builds it, the vector env's
    autoreset mode is read from its ``metadata["autoreset_mode"]`` (:func:`autoreset_mode`), never assumed. A vector
    env with ``metadata["records_episode_statistics"]`` writes ``info["episode"]`` itself (as gymnasium's
    ``RecordEpisodeStatistics`` would) and is not wrapped again; one that gives ``info["active"]`` (a bool per row)
    marks rows whose steps count nowhere (:mod:`lit_ppo.envs.multiagent`).
    """
    if vectorization in ("sync", "async"):
        # A partial of a module-level function with plain-data arguments pickles into async workers, which
        # resolve the id (and import a user's module) themselves.
        make_one = functools.partial(make_env, env_id, env_kwargs, list(wrappers or []), **make_kwargs)
        makers = [make_one] * num_envs
        if stagger is not None:
            first_index, total_envs = stagger
            makers = [functools.partial(make_staggered_env, env_id, env_kwargs, list(wrappers or []), first_index + i,
                                        total_envs, **make_kwargs) for i in range(num_envs)]
        if vectorization == "sync":
            envs = gym.vector.SyncVectorEnv(makers, autoreset_mode=AutoresetMode.SAME_STEP)
        else:  # workers whose default SIGTERM lets a terminate at exit end them (lit_ppo.envs.processes)
            envs = gym.vector.AsyncVectorEnv([in_worker(make) for make in makers],
                                             autoreset_mode=AutoresetMode.SAME_STEP)
    else:
        if stagger is not None:
            raise ConfigError(f"data.stagger_episodes: {refusal(describe_vectorization(vectorization))}")
        envs = _wrap_vector(_make_other_vector_env(env_id, num_envs, vectorization, env_kwargs, seed), wrappers)
        if envs.num_envs != num_envs:
            envs.close()
            raise ConfigError(f"data.vectorization: {describe_vectorization(vectorization)} made {envs.num_envs} "
                              f"environments, but data.num_envs is {num_envs}; make the factory honour num_envs.")
    autoreset_mode(envs, vectorization)  # refuses DISABLED and unknown modes now, before any step
    if envs.metadata.get("records_episode_statistics"):  # its rows' episodes are its own to count (multiagent.py)
        return envs
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def autoreset_mode(envs: gym.vector.VectorEnv, vectorization: Vectorization = "?") -> AutoresetMode:
    """The vector env's autoreset mode, from ``metadata["autoreset_mode"]``: ``SAME_STEP`` or ``NEXT_STEP``."""
    mode = envs.metadata.get("autoreset_mode")
    if isinstance(mode, str):  # EnvPool and older code may give the value rather than the enum
        mode = next((m for m in AutoresetMode if mode in (m.value, m.name)), mode)
    if mode in (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP):
        return mode
    raise ConfigError(
        f"data.vectorization: {describe_vectorization(vectorization)} has autoreset mode {mode!r} "
        f"(metadata['autoreset_mode']); PPO needs the environments to reset themselves: "
        f"AutoresetMode.NEXT_STEP or SAME_STEP (gymnasium's DISABLED leaves finished environments stopped)."
    )


def rebuilt_by_pickling(envs: gym.vector.VectorEnv) -> Optional[str]:
    """Why pickling ``envs`` would not keep the episodes in progress, or None where it would.

    gymnasium's ``EzPickle`` environments (Box2D's LunarLander and BipedalWalker, the MuJoCo ones) pickle as their
    constructor arguments: unpickled, each is a new environment without the episode it was in (LunarLander's
    ``step`` then fails an assertion; MuJoCo's would go on silently from its initial state).
    """
    for env in getattr(envs.unwrapped, "envs", ()):  # SyncVectorEnv's sub-environments, under any vector wrapper
        if isinstance(env.unwrapped, gym.utils.EzPickle):
            return (f"{type(env.unwrapped).__name__} pickles as its constructor arguments (gymnasium's EzPickle), "
                    "not its state")
    return None


def describe_vectorization(vectorization: Vectorization) -> str:
    """How an error names ``data.vectorization``: a mode as written, a user's factory by its class path."""
    return repr(vectorization) if isinstance(vectorization, str) else repr(vectorization.get("class_path"))


def _make_other_vector_env(env_id: str, num_envs: int, vectorization: Vectorization,
                           env_kwargs: Optional[dict[str, Any]], seed: Optional[int] = None) -> gym.vector.VectorEnv:
    """``native``, ``envpool`` or a user's factory (see :func:`make_vector_env`)."""
    kwargs = dict(env_kwargs or {})
    if vectorization == "native":
        spec = gym.registry.get(env_id) if ":" not in env_id else None
        if spec is None or spec.vector_entry_point is None:
            raise ConfigError(
                f"data.vectorization: 'native': environment {env_id!r} registers no vector implementation (its "
                "spec's vector_entry_point is None; gymnasium has them for CartPole-v1, for example). Use 'sync' or "
                "'async', or 'envpool'.")
        try:
            return gym.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point", **kwargs)
        except Exception as err:
            raise ConfigError(f"data.vectorization: 'native' {env_id!r} with data.env_kwargs {kwargs}: "
                              f"{type(err).__name__}: {err}") from err
    if vectorization == "envpool":
        try:
            import envpool
        except ImportError:
            raise ConfigError("data.vectorization: 'envpool' needs EnvPool: pip install 'lit_ppo[envpool]' "
                              "(or use 'sync', 'async' or 'native').") from None
        # Seeded here; the rollouts' reset(seed=...) then changes nothing, which gymnasium warns about at every reset.
        warnings.filterwarnings("ignore", message=".*EnvPool seeds are fixed when the environment is created.*")
        try:
            return envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=seed or 0, **kwargs)
        except Exception as err:
            raise ConfigError(f"data.vectorization: 'envpool' cannot make {env_id!r} with data.env_kwargs "
                              f"{kwargs}: {type(err).__name__}: {str(err).splitlines()[0][:300]}") from err
    class_path, factory = resolve(vectorization, "data.vectorization")
    try:
        envs = factory(num_envs=num_envs)
    except Exception as err:
        raise ConfigError(f"data.vectorization: {class_path}(num_envs={num_envs}, ...) raised "
                          f"{type(err).__name__}: {err}") from err
    if not isinstance(envs, gym.vector.VectorEnv):
        raise ConfigError(f"data.vectorization: {class_path} returned a {type(envs).__name__}, not a "
                          "gymnasium.vector.VectorEnv.")
    return envs


def _wrap_vector(envs: gym.vector.VectorEnv, wrappers: Optional[Sequence[WrapperConfig]]) -> gym.vector.VectorEnv:
    for index, config in enumerate(wrappers or []):
        class_path, wrap = resolve(config, f"data.wrappers[{index}]")
        target = getattr(wrap, "func", wrap)
        if not (isinstance(target, type) and issubclass(target, gym.vector.VectorWrapper)):
            envs.close()
            raise ConfigError(
                f"data.wrappers[{index}]: {class_path} is not a gymnasium.vector.VectorWrapper; with a vector env "
                "other than sync/async, wrappers wrap the vector env (e.g. gymnasium.wrappers.vector."
                "NormalizeObservation). Use data.vectorization 'sync' for per-environment wrappers.")
        envs = wrap(envs)
    return envs


def make_evaluation_env(
    env_id: str,
    num_envs: int,
    env_kwargs: Optional[dict[str, Any]] = None,
    wrappers: Optional[Sequence[WrapperConfig]] = None,
    vectorization: Vectorization = "sync",
    seed: Optional[int] = None,
) -> gym.vector.VectorEnv:
    """The vector env of deterministic evaluation: the environment's own vectorized implementation (its spec's
    ``vector_entry_point``, e.g. ``CartPoleVectorEnv``, which steps all environments in one numpy call) where a
    plain registered id has one and no wrappers are configured; otherwise :func:`make_vector_env` (sync).

    With ``vectorization`` other than ``sync``/``async`` (native, EnvPool, a user's factory) evaluation uses that
    choice, as training does. Evaluation counts only the first episode of each environment, so the autoreset mode
    does not matter here.
    """
    if vectorization not in ("sync", "async"):
        return make_vector_env(env_id, num_envs, vectorization, env_kwargs, wrappers, seed=seed)
    spec = None if wrappers or ":" in env_id else gym.registry.get(env_id)
    kwargs = dict(env_kwargs or {})
    # gym.make applies max_episode_steps with a TimeLimit wrapper (None: the registered limit, -1: none); a native
    # env counts steps itself and needs a positive limit, so it is used only when one is known.
    limit = kwargs.pop("max_episode_steps", None)
    if limit is None and spec is not None:
        limit = spec.max_episode_steps
    native = spec is not None and spec.vector_entry_point is not None and not spec.additional_wrappers
    if native and isinstance(limit, int) and limit > 0:
        try:
            return gym.make_vec(env_id, num_envs, "vector_entry_point", max_episode_steps=limit, **kwargs)
        except (TypeError, gym.error.Error):
            pass  # e.g. a keyword only gym.make takes (disable_env_checker): the sync path takes it or explains it
    return make_vector_env(env_id, num_envs, "sync", env_kwargs, wrappers)
