"""The `train` flow: pretraining (trainer.train) as a Prefect flow run, so that a curation run and
the training on its mixtures show up side by side in Prefect. One process; for several, run
``torchrun --nproc_per_node N -m trainer.train CONFIG`` (the same code, outside Prefect)."""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.logs import PROGRESS
from trainer.config import TrainConfig


def trainer_log(progress: bool = True):
    """The trainer's ``log`` in a task: its warnings at Prefect's WARNING (so that --quiet still
    shows them), its progress lines at INFO, or not at all (``progress=False``: an experiment's
    many runs)."""
    from trainer.checkpoints import WARNING

    logger = get_run_logger()

    def log(line: str) -> None:
        if line.startswith(WARNING):
            logger.warning(line)
        elif progress:
            logger.info(line, extra=PROGRESS)

    return log


@task(name="pretrain", cache_policy=NO_CACHE, task_run_name="pretrain-{config.out_dir.name}")
def pretrain_task(config: TrainConfig, resume: bool = False, verified: bool = False) -> dict:
    from trainer.train import train

    return train(config, resume=resume, log=trainer_log(), verified=verified)


@flow(name="train", validate_parameters=False)
def train_flow(config: TrainConfig, resume: bool = False, verified: bool = False) -> dict:
    """Train as ``config`` says (continuing from its out_dir's checkpoint, if any); return the
    summary. ``verified``: trainer.train.preflight passed just before (its checks are not
    repeated at length)."""
    return pretrain_task(config, resume, verified)
