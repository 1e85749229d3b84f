#!/usr/bin/env bash
# Multi-node lit_ppo on SLURM: one task per GPU; Lightning reads the SLURM environment (ranks, master address)
# and sets up DDP across nodes. Submit with: sbatch scripts/slurm_multinode.sh
#SBATCH --job-name=lit_ppo
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=02:00:00
# At the time limit SLURM sends SIGTERM: every rank finishes its rollout, last.ckpt is saved and the job exits;
# submitting this script again continues from it (`--ckpt_path last` starts fresh when there is none yet).
set -euo pipefail
srun python -m lit_ppo fit --config cartpole.yaml \
  --trainer.accelerator gpu --trainer.devices 4 --trainer.num_nodes 2 --trainer.strategy ddp \
  --ckpt_path last
