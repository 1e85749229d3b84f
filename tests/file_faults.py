"""Faults in files, for the error-path tests: reached from configs as ``tests.file_faults.<name>``."""

import lightning as L


class CorruptOnSetup(L.Callback):
    """Overwrites the file ``path`` with bytes that are no checkpoint when the Trainer sets up, which is after the
    CLI read it and before the Trainer restores it."""

    def __init__(self, path: str) -> None:
        self.path = path

    def setup(self, trainer, pl_module, stage: str) -> None:
        with open(self.path, "r+b") as f:
            f.seek(100)
            f.write(b"not a checkpoint any more" * 40)
