"""Closing the training environments when a fit fails: Lightning calls ``LightningDataModule.teardown`` only when a
stage ends normally, and an ``AsyncVectorEnv``'s workers (or the overlap's collector) must be joined on every exit
path."""

import lightning as L


class CloseEnvironmentsOnError(L.Callback):
    """Closes the data module's training environments (and so joins an ``AsyncVectorEnv``'s workers) when fit ends
    with an exception: Lightning calls ``LightningDataModule.teardown`` only when a stage ends normally."""

    def on_exception(self, trainer: "L.Trainer", pl_module: "L.LightningModule", exception: BaseException) -> None:
        datamodule = trainer.datamodule
        if datamodule is not None and callable(getattr(datamodule, "teardown", None)):
            datamodule.teardown("fit")
