"""Where a run's metric rows go: the outputs' protocol (:mod:`.loggers`) and the outputs
(:mod:`.jsonl_output`; W&B in :mod:`.wandb_output` over :mod:`.wandb_logger`, read back by
:mod:`.wandb_history`, a checkpoint carried as an artifact by :mod:`.wandb_carry`;
:mod:`.tensorboard_logger`)."""
