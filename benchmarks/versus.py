"""Win, draw and loss rates of a trained turn-based policy against an opponent, from each seat.

    python benchmarks/versus.py runs/connect_four/checkpoints/last.ckpt [--games 200] [--seed 0]
                                [--opponent random win_or_block runs/old/checkpoints/last.ckpt ...]
                                [--moves deterministic|sampled]

Loads the checkpoint with ``lit_ppo.load_policy`` (what a user plays with in Python) and plays ``--games`` games per
seat of the checkpoint's game (its ``data.vectorization`` env) against each ``--opponent`` inside
``lit_ppo.envs.turn_based``, the policy's deterministic move among the valid ones each turn. An opponent is
``random``, ``win_or_block`` (connect four's scripted player) or another checkpoint (an earlier snapshot, loaded the
same way, also playing its deterministic move). Prints one row per opponent and seat.

Two deterministic policies play one game per seat, however many are asked for: ``--moves sampled`` has the policy and
every checkpoint opponent sample their moves from their distributions (as they act while training; torch seeded by
``--seed``), so that the games against a snapshot differ and the rates measure something.
"""

import argparse

import numpy as np

import lit_ppo
from lit_ppo.envs.opponents import OPPONENTS
from lit_ppo.envs.turn_based import TurnBasedVsOpponent


def checkpoint_opponent(path: str, deterministic: bool = True):
    """A checkpoint as an opponent ``(rng, action_mask, board) -> move``: its deterministic move, or a sample."""
    snapshot = lit_ppo.load_policy(path)

    def move(rng, mask, board) -> int:
        obs = np.asarray(board, np.float32).reshape(1, -1)
        return int(snapshot.predict(obs, deterministic=deterministic, action_masks=mask[None])[0][0])

    return move


def play(policy, env: str, env_kwargs: dict, opponent, games: int, seed: int,
         deterministic: bool = True) -> dict[str, list[float]]:
    """The outcomes (+1, 0, -1) of ``games`` games in each seat; copy ``i`` starts in seat ``i % 2`` and
    alternates, so ``2 * games`` copies of one game each give ``games`` per seat."""
    envs = TurnBasedVsOpponent(2 * games, env, env_kwargs, opponent)
    obs, info = envs.reset(seed=seed)
    outcome: list = [None] * envs.num_envs
    while any(o is None for o in outcome):
        action, _ = policy.predict(obs, deterministic=deterministic, action_masks=info["action_mask"])
        obs, reward, terminated, truncated, info = envs.step(action)
        for i in np.flatnonzero(terminated | truncated):
            outcome[i] = reward[i] if outcome[i] is None else outcome[i]
    envs.close()
    return {seat: [outcome[i] for i in range(envs.num_envs) if i % 2 == k] for k, seat in enumerate(envs.seats)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--games", type=int, default=200, help="games per seat")
    parser.add_argument("--opponent", nargs="+", default=["random"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--moves", choices=("deterministic", "sampled"), default="deterministic",
                        help="the policy's and checkpoint opponents' moves: their mode, or a sample")
    args = parser.parse_args()
    policy = lit_ppo.load_policy(args.checkpoint)
    import torch

    torch.manual_seed(args.seed)  # predict samples from torch's generator
    deterministic = args.moves == "deterministic"
    init = torch.load(args.checkpoint, map_location="cpu", weights_only=False)["datamodule_hyper_parameters"]
    game = init["vectorization"]["init_args"]
    print(f"versus: {args.checkpoint} ({game['env']}), {args.games} games per seat, {args.moves} moves, "
          f"seed {args.seed}")
    print(f"{'opponent':<24} {'seat':<10} {'wins':>6} {'draws':>6} {'losses':>6}")
    for name in args.opponent:
        opponent = name if name in OPPONENTS else checkpoint_opponent(name, deterministic)
        for seat, outcomes in play(policy, game["env"], game.get("env_kwargs") or {}, opponent, args.games,
                                   args.seed, deterministic).items():
            o = np.array(outcomes)
            print(f"{name[-24:]:<24} {seat:<10} {np.mean(o > 0):>6.1%} {np.mean(o == 0):>6.1%} {np.mean(o < 0):>6.1%}")


if __name__ == "__main__":
    main()
