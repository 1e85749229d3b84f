"""The learner in the second seat against a uniformly random first player, straight on PettingZoo's connect_four_v3
(not through lit_ppo's adapter): how many of 300 games it loses, and the first losing games' moves and final boards
(O the learner, X the random player).  python second_seat_losses.py CHECKPOINT"""
import sys

import numpy as np, lit_ppo
from pettingzoo.classic import connect_four_v3
p = lit_ppo.load_policy(sys.argv[1])
rng = np.random.default_rng(0)
losses = []
for g in range(300):
    env = connect_four_v3.env(); env.reset(seed=g)
    moves = []
    for agent in env.agent_iter():
        obs, rew, term, trunc, info = env.last()
        if term or trunc:
            if agent == "player_1" and rew < 0: losses.append((moves, obs["observation"]))
            env.step(None); continue
        mask = obs["action_mask"]
        if agent == "player_0":
            a = int(rng.choice(np.flatnonzero(mask)))
        else:
            o = np.asarray(obs["observation"], np.float32).reshape(1, -1)
            a = int(p.predict(o, deterministic=True, action_masks=mask[None].astype(bool))[0][0])
        moves.append(a); env.step(a)
print(len(losses), "losses of 300")
for moves, ob in losses[:6]:
    board = ob[:, :, 0] - ob[:, :, 1]  # player_1's view: its own = +1 ... ob channels: [own, opponent]
    print(moves)
    for r in range(6): print("".join({1:"O",-1:"X",0:"."}[int(v)] for v in board[r]))
