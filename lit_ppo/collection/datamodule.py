"""The data module: environments, rollout settings and the step budget, around the datasets of :mod:`lit_ppo.collection.datasets`.

How PPO maps onto Lightning: **one Lightning epoch = one rollout = one Lightning step.** Each ``__iter__``
collects one rollout of ``num_envs x num_steps`` steps with the latest weights and yields it once, whole, as a
:class:`lit_ppo.collection.rollout.Rollout` with the minibatch order of its ``update_epochs`` shuffled passes; the module's
``training_step`` then takes one optimizer step per minibatch (manual optimization). The rollout crosses to the
learner's device once, and Lightning's per-batch machinery runs once per rollout instead of once per minibatch.
``__len__`` is 1, so Lightning never prefetches the next rollout before this one's updates are done.

The data module acts with the policy it is given once (:meth:`PPODataModule.set_policy`, which ``PPOModule``
calls in its ``setup``) and owns the budget: each rollout says how much of ``total_timesteps`` was done before it
and whether it is the last one.
"""

import os
from typing import Any, Optional, Union

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_warn
from torch.utils.data import DataLoader

from lit_ppo.collection.acting import PolicyPlacement
from lit_ppo.collection.action_masks import mask_size
from lit_ppo.checkpointing.rng import global_rng_states, set_global_rng_states
from lit_ppo.envs.env_spec import describe_spaces
from lit_ppo.envs.make import VECTORIZATION_MODES, describe_vectorization, make_evaluation_env
from lit_ppo.collection.datasets import EvaluationDataset, RolloutDataset
from lit_ppo.errors import ConfigError, require
from lit_ppo.collection.overlap.dataset import OverlappedRolloutDataset
from lit_ppo.collection.recipe import RolloutRecipe
from lit_ppo.envs.spaces import spec_from_dict
from lit_ppo.envs.stagger import STAGGERABLE, refusal


def reward_scaling(normalize_reward: Optional[bool], return_scaling: Optional[bool]) -> tuple[bool, bool]:
    """``(normalize_reward, return_scaling)`` as they apply, their ``null`` resolved: the critic's targets scaled
    when neither is set; a config that sets ``normalize_reward`` (all written before 2026-12-06) keeps its meaning."""
    if return_scaling is None:
        return_scaling = normalize_reward is None
    return bool(normalize_reward), return_scaling


class PPODataModule(L.LightningDataModule):
    """Environments, rollout settings and the environment-step budget.

    Args:
        env_id: a registered gymnasium id, ``module:Id`` (imports the module that registers it, e.g.
            ``ale_py:ALE/Breakout-v5``), or an unregistered environment class or function ``my_pkg.envs:MyEnv``.
        env_kwargs: keyword arguments for ``gymnasium.make`` (including ``max_episode_steps``).
        wrappers: gymnasium wrappers applied in order to every environment: class paths, or
            ``{class_path: gymnasium.wrappers.FrameStackObservation, init_args: {stack_size: 4}}``.
        normalize_obs: normalize vector observations by running mean and std (clip +-10); the statistics are
            the policy's (saved in checkpoints, used unchanged at evaluation). Images and discrete observations
            pass through unchanged. On by default (see ``docs/results.md``, "Package defaults": on untuned envs it
            helped more than it cost).
        normalize_reward: divide rewards by the running std of the discounted return (clip +-10); statistics
            as for ``normalize_obs``. ``null`` (the default): off (see ``return_scaling``).
        return_scaling: instead of scaling rewards, the critic learns the GAE returns divided by their running std
            and GAE runs on the raw rewards (its values multiplied back by that std): Tianshou's ``return_scaling``,
            part of its MuJoCo recipe. The advantages are then in the rewards' own units (``model.norm_adv`` rescales
            them if wanted). Needs ``normalize_reward`` off. ``null`` (the default): on when neither key is set, off
            when ``normalize_reward`` is set (so a config written before this default, which sets
            ``normalize_reward``, keeps its meaning); ``normalize_reward: null, return_scaling: false`` scales
            nothing. The default since 2026-12-06, which scaled rewards before: reward scaling held HalfCheetah-v5
            below 2,000 on every run measured, where this scaling of the critic's targets keeps Pendulum-v1's and
            Ant-v5's gains (:func:`reward_scaling`; ``docs/zoo.md``, "Without a config").
        num_envs: environments per process (rank).
        num_steps: steps per environment in one rollout.
        total_timesteps: the budget: environment steps of all ranks together; training stops after
            ``total_timesteps // (num_envs * num_steps * world_size)`` iterations (rollouts).
        gamma: discount factor.
        gae_lambda: GAE lambda.
        update_epochs: passes over each rollout (PPO's K epochs).
        minibatch_size: samples per optimizer step; must divide ``num_envs * num_steps``.
        vectorization: ``sync`` (one process; best for cheap envs), ``async`` (a subprocess per env), ``native``
            (the env's own vectorized implementation, e.g. CartPole's), ``envpool``, or the class path (or
            ``{class_path, init_args}``) of a function returning your own ``gymnasium.vector.VectorEnv`` for
            ``num_envs=...`` (:func:`lit_ppo.envs.make.make_vector_env`). Same-step and next-step autoreset both work.
        eval_episodes: deterministic episodes played by ``validate``/``test`` (and validation during fit).
        action_masks: invalid-action masks from the environment: ``null`` (none), ``method`` (its
            ``action_masks()``) or ``info`` (``info["action_mask"]``); see :mod:`lit_ppo.collection.action_masks`. Masked
            actions get probability 0 in acting, in the update and in evaluation.
        seed: base seed of the environments and of action sampling; rank r uses ``seed + r * num_envs``.
            ``None`` takes the value of ``seed_everything``.
        overlap: collect the next rollout while the learner learns from this one, in a collector process beside
            the learner (one per rank) that acts with a CPU copy of the policy exactly one version behind: rollout
            ``j`` is collected with the weights from before the update on rollout ``j - 1`` (rollouts 0 and 1 both
            with the initial ones); ``model.decoupled`` corrects the update for that lag (:mod:`lit_ppo.learning.decoupled`).
            Same seed, same numbers, and resumable, as without it; needs ``model.actor_device: cpu``
            (:mod:`lit_ppo.collection.overlap.dataset`). Off by default: synchronous PPO stays the reference.
        recompute_advantages: before each pass over a rollout after the first, recompute its GAE advantages and
            returns with the current critic (Tianshou's ``recompute_advantage``, part of its MuJoCo recipe): the
            rollout then also carries its rewards, ends and bootstrap observations
            (:func:`lit_ppo.collection.gae.recompute_gae`). Costs one critic pass over the rollout per epoch.
            Feed-forward policies only. Off by default.
        stagger_episodes: cut each environment's first episode short by a different share of its time limit
            (environment ``i`` of ``n`` over all ranks by ``i / n`` of it), so that environments whose episodes all
            run to the limit (Swimmer, HalfCheetah) do not play the same part of their episodes in every rollout
            (:mod:`lit_ppo.envs.stagger`). ``null`` (the default since 2026-12-07): on with sync and async
            vectorization, off with the others (which take no wrapper per environment; ``true`` there is refused).
            Swimmer-v5 with SB3's settings on lit_ppo: 4 envs x 512 steps in step land mostly in the slow gait
            (49.5 / 70.0 / 110.8), staggered in the fast one (115.9 / 115.8; one env x 2,048 steps 107.0); the
            package defaults go from 74.9 to 92.0 there and from 3,345.3 to 4,222.9 on HalfCheetah-v5 (3 seeds,
            ``docs/zoo.md``, "Without a config"). A run whose first episodes all end before their cut is unchanged.
    """

    def __init__(
        self,
        env_id: str = "CartPole-v1",
        env_kwargs: Optional[dict[str, Any]] = None,
        wrappers: Optional[list[Union[str, dict[str, Any]]]] = None,
        normalize_obs: bool = True,
        normalize_reward: Optional[bool] = None,
        num_envs: int = 4,
        num_steps: int = 512,
        total_timesteps: int = 500_000,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        update_epochs: int = 10,
        minibatch_size: int = 64,
        vectorization: Union[str, dict[str, Any]] = "sync",
        eval_episodes: int = 20,
        action_masks: Optional[str] = None,
        seed: Optional[int] = None,
        overlap: bool = False,
        recompute_advantages: bool = False,
        return_scaling: Optional[bool] = None,
        stagger_episodes: Optional[bool] = None,
    ) -> None:
        super().__init__()
        require(num_envs > 0, "data.num_envs", f"must be positive, got {num_envs}.")
        require(num_steps > 0, "data.num_steps", f"must be positive, got {num_steps}.")
        require(total_timesteps > 0, "data.total_timesteps", f"must be positive, got {total_timesteps}.")
        require(0.0 <= gamma <= 1.0, "data.gamma", f"must be in [0, 1], got {gamma}.")
        require(0.0 <= gae_lambda <= 1.0, "data.gae_lambda", f"must be in [0, 1], got {gae_lambda}.")
        require(update_epochs > 0, "data.update_epochs", f"must be positive, got {update_epochs}.")
        require(eval_episodes > 0, "data.eval_episodes", f"must be positive, got {eval_episodes}.")
        require(vectorization in VECTORIZATION_MODES or isinstance(vectorization, dict) or "." in str(vectorization),
                "data.vectorization", f"must be one of {VECTORIZATION_MODES} or the class path of a function that "
                f"returns a gymnasium.vector.VectorEnv, got {vectorization!r}.")
        require(not stagger_episodes or vectorization in STAGGERABLE, "data.stagger_episodes",
                refusal(describe_vectorization(vectorization)))
        scale_rewards, scale_returns = reward_scaling(normalize_reward, return_scaling)
        require(not (scale_returns and scale_rewards), "data.return_scaling",
                "and data.normalize_reward both rescale what the critic learns; set data.normalize_reward: false "
                "to scale the critic's targets instead of the rewards (or return_scaling: false).")
        rollout_size = num_envs * num_steps
        require(
            0 < minibatch_size <= rollout_size and rollout_size % minibatch_size == 0,
            "data.minibatch_size",
            f"{minibatch_size} must divide the rollout size num_envs * num_steps = {rollout_size} "
            f"(e.g. {rollout_size // 4 or 1} for 4 minibatches).",
        )
        self.save_hyperparameters()
        # Validates the id and the spaces now, before any Trainer exists; linked into the model by the CLI.
        self.env_spec = describe_spaces(env_id, env_kwargs, wrappers, vectorization, num_envs)
        self.env_spec.update(normalize_obs=normalize_obs, normalize_reward=scale_rewards, return_scaling=scale_returns)
        if action_masks is not None:
            mask_size(spec_from_dict(self.env_spec["action"]), action_masks)  # a space or source without masks fails now
            self.env_spec["action_masks"] = action_masks
        self.train_dataset: Optional[Union[RolloutDataset, OverlappedRolloutDataset]] = None
        self.placement: Optional[PolicyPlacement] = None
        self._resume_state: Optional[dict[str, Any]] = None

    def set_policy(self, policy: torch.nn.Module, actor_device: str = "cpu") -> None:
        """The policy to act with (rollouts and evaluation), given once; its weights are read at each rollout.
        ``PPOModule.setup`` calls this; ``actor_device`` is :class:`lit_ppo.collection.acting.PolicyPlacement`'s choice."""
        if self.hparams.overlap and actor_device != "cpu":
            raise ConfigError(f"model.actor_device: {actor_device!r} does not combine with data.overlap, whose collector "
                              "process always acts with a CPU copy of the policy; set model.actor_device: cpu, or "
                              "data.overlap: false to act on the learner's device.")
        self.placement = PolicyPlacement(policy, actor_device)

    # -- sizes derived once, at start-up --------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return self.trainer.world_size if self.trainer is not None else 1

    @property
    def rank(self) -> int:
        return self.trainer.global_rank if self.trainer is not None else 0

    @property
    def steps_per_iteration(self) -> int:
        """Environment steps of one rollout across all ranks."""
        return self.rollout_recipe().steps_per_iteration

    @property
    def num_iterations(self) -> int:
        """Rollouts in the budget ``total_timesteps``."""
        return self.rollout_recipe().num_iterations

    def iterations_left(self, env_steps: int) -> int:
        """Rollouts of this run's size that still fit in the budget after ``env_steps`` (a checkpoint's count)."""
        return max(self.hparams.total_timesteps - env_steps, 0) // self.steps_per_iteration

    @property
    def base_seed(self) -> int:
        if self.hparams.seed is not None:
            return self.hparams.seed
        return int(os.environ.get("PL_GLOBAL_SEED", 0))

    def setup(self, stage: str) -> None:
        if stage != "fit":
            return
        require(
            self.num_iterations >= 1,
            "data.total_timesteps",
            f"{self.hparams.total_timesteps} is less than one iteration "
            f"(num_envs * num_steps * world_size = {self.steps_per_iteration} steps).",
        )
        max_epochs = self.trainer.max_epochs
        if max_epochs is not None and 0 <= max_epochs < self.num_iterations:
            rank_zero_warn(f"lit_ppo: trainer.max_epochs={max_epochs} stops training after {max_epochs} iterations, "
                           f"before the budget data.total_timesteps={self.hparams.total_timesteps} "
                           f"({self.num_iterations} iterations); use max_epochs=-1 to train to the budget.")

    # -- loaders -----------------------------------------------------------------------------------------------
    def _require_placement(self) -> PolicyPlacement:
        if self.placement is None:
            raise ConfigError("PPODataModule has no policy to act with: fit it with a PPOModule (which hands over "
                              "its policy in setup) or call datamodule.set_policy(policy) first.")
        return self.placement

    def _pin_memory(self) -> bool:
        # Page-locked host memory lets the once-per-rollout copy to a CUDA learner run asynchronously.
        return self.trainer is not None and self.trainer.strategy.root_device.type == "cuda"

    def rollout_recipe(self, rank: int = 0) -> RolloutRecipe:
        """What rank ``rank``'s rollout stream is made from (plain data: a collector process builds it too)."""
        return RolloutRecipe(dict(self.hparams), self.env_spec, rank, self.world_size, self.base_seed)

    def build_rollout_dataset(self, placement: PolicyPlacement, rank: int = 0) -> RolloutDataset:
        """The rollout stream of rank ``rank``, acting with what ``placement`` gives, in this process."""
        return self.rollout_recipe(rank).build(placement, self._collective_failures())

    def _build_train_dataset(self) -> Union[RolloutDataset, OverlappedRolloutDataset]:
        placement = self._require_placement()
        if not self.hparams.overlap:
            return self.build_rollout_dataset(placement, self.rank)
        recipe = self.rollout_recipe(self.rank)
        if placement.policy.state_size:
            recipe.check_sequence_minibatches()  # before a process is started
            recipe.check_recompute()
        return OverlappedRolloutDataset(recipe, placement.policy, self._collective_failures())

    def _collective_failures(self):
        return self._first_failure if self.world_size > 1 else None

    def _first_failure(self, message: Optional[str]) -> Optional[str]:
        """The first failing rank's message on every rank, or None when no rank failed (one reduction per
        rollout; the messages are gathered only after a failure)."""
        if not self.trainer.strategy.reduce_boolean_decision(message is not None, all=False):
            return None
        messages: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(messages, message)
        return next(m for m in messages if m is not None)

    def train_dataloader(self) -> DataLoader:
        if self.train_dataset is None:
            self.train_dataset = self._build_train_dataset()
            if self._resume_state is not None:
                self._restore_collector(self._resume_state)
                self._resume_state = None
        # batch_size=None: the dataset yields whole rollouts; num_workers=0: on-policy data needs the
        # live environments and the latest weights, which worker processes would not have.
        return DataLoader(self.train_dataset, batch_size=None, pin_memory=self._pin_memory())

    def _evaluation_loader(self) -> DataLoader:
        hp = self.hparams
        # Fresh environments with seeds disjoint from training's.
        seed = self.base_seed + 1_000_003 + self.rank * hp.eval_episodes

        def make_envs():
            # The environment's native vector env where it has one (faster), else the sync one training uses.
            return make_evaluation_env(hp.env_id, hp.eval_episodes, hp.env_kwargs, hp.wrappers, hp.vectorization,
                                       seed)

        dataset = EvaluationDataset(make_envs, self._require_placement().for_evaluation, hp.eval_episodes, seed,
                                    self.rollout_recipe(self.rank).mask_reader())
        return DataLoader(dataset, batch_size=None)

    def val_dataloader(self) -> DataLoader:
        return self._evaluation_loader()

    def test_dataloader(self) -> DataLoader:
        return self._evaluation_loader()

    def predict_dataloader(self) -> DataLoader:
        # `predict` plays the same deterministic episodes; lit_ppo.callbacks.EpisodeCSVWriter writes them out.
        return self._evaluation_loader()

    # -- checkpointing: every rank's environments, generator and counters, at rollout boundaries -------------
    def state_dict(self) -> dict[str, Any]:
        if self.train_dataset is None:
            return {}
        state = {**self.train_dataset.state_dict(), "rng": global_rng_states()}
        if self.world_size > 1:
            # Checkpoints are written by rank 0 only: gather every rank's streams into it.
            states: list[Any] = [None] * self.world_size
            torch.distributed.all_gather_object(states, state)
            return {"ranks": states}
        return {"ranks": [state]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # Lightning restores this before the loaders exist; the collector takes it when it is built.
        self._resume_state = state_dict or None

    def _restore_collector(self, state_dict: dict[str, Any]) -> None:
        ranks = state_dict.get("ranks", [])
        # The run's environment steps (all ranks) at the checkpoint, the same in every rank's state: the count, and
        # the budget, go on from there whatever this run's rollout size (None: saved before the count was kept).
        env_steps = saved_env_steps(ranks[0]) if ranks else None
        if env_steps is not None:
            self._check_budget_left(env_steps)
        if self.rank >= len(ranks):
            rank_zero_warn(f"lit_ppo: the checkpoint holds the rollout state of {len(ranks)} process(es) and this "
                           f"run has {self.world_size}; rank {self.rank} starts fresh environments.")
            # Counted from the iteration and step resumed at, as every other rank: all reach the budget together.
            self.train_dataset.restart_at(self.trainer.current_epoch, env_steps)
            return
        note = self.train_dataset.load_state_dict(ranks[self.rank])
        set_global_rng_states(ranks[self.rank]["rng"])
        if note:
            rank_zero_warn(f"lit_ppo: resuming inexactly: {note}")

    def _check_budget_left(self, env_steps: int) -> None:
        total, per_rollout = self.hparams.total_timesteps, self.steps_per_iteration
        if env_steps + per_rollout > total:
            error = ConfigError(
                f"data.total_timesteps: the checkpoint has done {env_steps} environment steps of the budget {total}, "
                f"which leaves less than one rollout ({per_rollout} steps: num_envs x num_steps x processes); raise "
                "data.total_timesteps to train on. The checkpoint is unchanged.")
            error.every_rank = True  # every rank computes the same: said once
            raise error

    def teardown(self, stage: str) -> None:
        if stage == "fit" and self.train_dataset is not None:
            self.train_dataset.close()
            self.train_dataset = None


def saved_env_steps(rank_state: dict[str, Any]) -> Optional[int]:
    """The run's environment steps in one rank's checkpointed rollout state (a synchronous collector's, an overlapped
    one's, or a rank restarted without a rollout since), or None where it was saved before the count was kept."""
    collector = rank_state.get("collector")
    value = collector.get("env_steps") if collector is not None else rank_state.get("env_steps")
    return None if value is None else int(value)
