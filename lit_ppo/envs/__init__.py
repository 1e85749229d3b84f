"""Making the environments a rollout plays: vector envs, spaces, the processes they run in.

``make_env`` is named here because checkpoints pickle their vector environments, whose factories are
``functools.partial(lit_ppo.envs.make_env, ...)``: checkpoints written before the package had rooms still load.
"""

from lit_ppo.envs.make import make_env

__all__ = ["make_env"]
