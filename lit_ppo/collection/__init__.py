"""Playing the environments on the CPU into rollouts: acting, the collector, GAE, the datasets and
the data module, and the overlapped collector process."""
