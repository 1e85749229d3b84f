"""Multi-process runs for real, on gloo: a signal to one rank only, an environment failing on one rank only
(Lightning's DDP launcher, 2 processes), and two torchrun "nodes" on this machine."""

import csv
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import torch

from tests.conftest import REPO, wait_for_file

DDP = ["--config", "cartpole.yaml", "--trainer.enable_progress_bar", "false", "--trainer.logger", "false",
       "--trainer.strategy", "ddp", "--trainer.devices", "2"]
FAULTY = "tests.faulty_envs:LitPPOTest/Faulty-v0"


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path, **extra)


def _popen(args, cwd, **extra_env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lit_ppo", *args], cwd=cwd, env=_env(**extra_env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_sigterm_to_rank_0_only_stops_both_ranks_after_the_same_rollout(tmp_path):
    # Lightning's DDP launcher: the process started here is rank 0, rank 1 its child; only rank 0 gets the signal.
    proc = _popen(["fit", *DDP, "--data.total_timesteps", str(4000 * 512)], tmp_path)
    last = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    wait_for_file(last, proc)  # the first periodic save (iteration 10)
    first_step = torch.load(last, weights_only=False)["global_step"]
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "saved" in out and "--ckpt_path last" in out, out
    for noise in ("Traceback", "Connection closed", "LeafSpec"):
        assert noise not in out, out
    state = torch.load(last, weights_only=False)
    assert first_step < state["global_step"] < 4000 * 20 and state["global_step"] % 20 == 0
    # Both ranks' rollout streams are in it, at the same iteration.
    ranks = state["PPODataModule"]["ranks"]  # Lightning saves a data module's state under its class name
    assert [r["collector"]["iterations"] for r in ranks] == [state["epoch"] + 1] * 2


def test_an_environment_failing_on_rank_1_only_stops_every_rank_with_one_error_line(tmp_path):
    # Sub-environment 2 of rank 1 (first reset with seed 1 + 1 * 8 + 2) raises at its 40th step (iteration 2).
    proc = _popen(["fit", *DDP, "--data.env_id", FAULTY, "--data.total_timesteps", str(10 * 512)], tmp_path,
                  LIT_PPO_TEST_RAISE_AT="40", LIT_PPO_TEST_FAULTY_SEED="11")
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 2, out
    errors = [line for line in out.splitlines() if line.startswith("lit_ppo: error:")]
    assert len(errors) == 1, out
    assert "on rank 1, sub-environment 2 at its step 40" in errors[0] and "simulated simulator crash" in errors[0]
    for noise in ("Traceback", "Connection closed", "terminate called"):
        assert noise not in out, out


def test_an_environment_failing_early_in_a_collector_on_rank_1_is_one_error_line(tmp_path):
    # data.overlap: rank 1's collector fails in its second rollout, while its learner may still be reading the first,
    # whose shared tensors come through the collector. Before: the collector had ended by then, and rank 1 died of
    # an EOFError traceback in that read (rank 0 of gloo's "Connection closed by peer").
    proc = _popen(["fit", *DDP, "--data.overlap", "true", "--data.env_id", FAULTY, "--data.total_timesteps",
                   str(10 * 512)], tmp_path, LIT_PPO_TEST_RAISE_AT="40", LIT_PPO_TEST_FAULTY_SEED="11")
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 2, out
    errors = [line for line in out.splitlines() if line.startswith("lit_ppo: error:")]
    assert len(errors) == 1 and "on rank 1, sub-environment 2 at its step 40" in errors[0], out[-3000:]
    for noise in ("Traceback", "Connection closed", "leaked semaphore"):
        assert noise not in out, out[-3000:]


def test_rank_0_killed_ends_rank_1_with_one_error_line(tmp_path):
    # SIGKILL: rank 0 gets no say. Before: rank 1 printed gloo's "Connection reset by peer" traceback.
    from tests.conftest import session_processes

    proc = subprocess.Popen([sys.executable, "-m", "lit_ppo", "fit", *DDP, "--data.total_timesteps", str(4000 * 512)],
                            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    last = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    wait_for_file(last, proc)
    digest = last.read_bytes()
    proc.kill()
    try:
        out, _ = proc.communicate(timeout=60)  # the pipe closes when rank 1, which shares it, has ended too
    finally:
        for left in session_processes(proc.pid):
            left.kill()
    errors = [line for line in out.splitlines() if line.startswith("lit_ppo: error:")]
    assert len(errors) == 1 and "rank 1 lost contact with another process" in errors[0], out[-3000:]
    assert "--ckpt_path last" in errors[0]  # gloo's own words (reset, closed, broken pipe) depend on the moment
    assert "Traceback" not in out and "[rank1]:" not in out, out[-3000:]
    assert last.read_bytes() == digest


def test_two_torchrun_nodes_train_one_policy_and_count_both_nodes_steps(tmp_path):
    """The README's multi-node recipe with two nodes of one process each, each node in its own directory."""
    torchrun = shutil.which("torchrun")
    assert torchrun, "torchrun comes with torch"
    args = ["--config", "cartpole.yaml", "--trainer.enable_progress_bar", "false", "--trainer.num_nodes", "2",
            "--trainer.strategy", "ddp", "--trainer.devices", "1", "--data.total_timesteps", "2048",
            "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "logs",
            "--trainer.callbacks+=tests.ddp_probe.RankProbe"]
    from tests.conftest import session_processes

    # A port the OS has just given out: a fixed range could meet a port still held by an earlier run, and then the
    # node that cannot reach the store waits out its whole rendezvous timeout.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    nodes = []
    try:
        for rank in (0, 1):
            (tmp_path / f"node{rank}").mkdir()
            nodes.append(subprocess.Popen(
                [torchrun, "--nnodes", "2", "--nproc_per_node", "1", "--node_rank", str(rank), "--master_addr",
                 "127.0.0.1", "--master_port", port, "-m", "lit_ppo", "fit", *args],
                cwd=tmp_path / f"node{rank}", env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, start_new_session=True))
        outs = [node.communicate(timeout=300)[0] for node in nodes]
    finally:  # on a timeout too: torchrun and its worker of each node end with the test
        for node in nodes:
            for left in session_processes(node.pid):
                left.kill()
    assert [node.returncode for node in nodes] == [0, 0], outs
    r0 = torch.load(tmp_path / "node0/rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "node1/rank1.pt", weights_only=True)
    assert r0["world_size"] == r1["world_size"] == 2
    for key, value in r0["params"].items():  # one policy across both nodes
        assert torch.equal(value, r1["params"][key]), key
    # The budget and the logged steps count both nodes: 2048 / (8 envs x 32 steps x 2 nodes) = 4 iterations,
    # logged by global rank 0 on node 0.
    [metrics] = (tmp_path / "node0/logs").glob("*/version_*/metrics.csv")
    steps = [float(r["time/env_steps"]) for r in csv.DictReader(metrics.open()) if r["time/env_steps"]]
    assert steps == [512.0 * i for i in range(1, 5)]
    assert torch.load(tmp_path / "node0/runs/cartpole/checkpoints/last.ckpt", weights_only=False)["global_step"] == 80
    assert not (tmp_path / "node1/logs").exists()  # loggers write on global rank 0 only
