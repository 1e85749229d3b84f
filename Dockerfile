# lit_ppo on the official PyTorch CUDA runtime image. Never built by this project's CI (its machines have no
# Docker engine), so it stays minimal. Usage (README, "Logging, videos and export"):
#   docker build -t lit_ppo .
#   docker run --gpus all -p 6006:6006 -v "$PWD/runs:/workspace/runs" lit_ppo
ARG BASE_IMAGE=pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime
FROM ${BASE_IMAGE}

WORKDIR /workspace
COPY pyproject.toml README.md ./
COPY lit_ppo ./lit_ppo
# The image's CUDA build of torch satisfies torch>=2.4, so pip keeps it.
RUN pip install --no-cache-dir ".[plot]"

# TensorBoard: docker run -p 6006:6006 -v "$PWD/runs:/workspace/runs" lit_ppo tensorboard --logdir runs --bind_all
EXPOSE 6006
CMD ["python", "-m", "lit_ppo", "fit", "--config", "cartpole.yaml"]
