"""What a finished plan means for the trainer that will read it: warnings `asp schedule` adds to its summary.

Each is legal but probably not what the user meant: a step cut short at the end of every epoch (a trainer that
reads fixed batches of consecutive rows, as verl's does, then cuts across the schedule's steps), and a
synchronous plan whose steps cannot keep every instance busy.
"""

from __future__ import annotations

import polars as pl

from asp_cli.settings import ScheduleSettings


def dividing_batch_size(prompts: int, batch: int) -> int | None:
    """The train batch size nearest ``batch`` (within half to twice it) that divides ``prompts``, or None."""
    candidates = [d for d in range(max(1, batch // 2), min(prompts, 2 * batch) + 1) if prompts % d == 0]
    return min(candidates, key=lambda d: (abs(d - batch), d)) if candidates else None


def plan_warnings(frame: pl.DataFrame, settings: ScheduleSettings) -> list[str]:
    """Warnings about ``frame`` (a schedule, all epochs) for the trainer ``settings`` describe."""
    warnings = []
    size = settings.train_batch_size
    prompts = int(frame.filter(pl.col("epoch") == frame["epoch"].min()).height) if frame.height else 0
    steps = frame.group_by("train_step").len().sort("train_step")
    short = steps.head(max(steps.height - 1, 0)).filter(pl.col("len") < size)
    if settings.epochs > 1 and short.height:
        nearest = dividing_batch_size(prompts, size)
        warnings.append(
            f"each epoch's {prompts:,} prompts end in a step of {int(short['len'][0]):,} groups, short of "
            f"--train-batch-size {size}: a trainer that reads batches of {size} consecutive rows (verl) cuts across "
            f"this schedule's steps from the second epoch on; use a --train-batch-size that divides {prompts:,}"
            + (f" (e.g. {nearest})" if nearest else "") + ", or export one epoch at a time (asp export --epoch)")
    if settings.trainer == "schedule" and settings.max_lag == 0 and settings.engine != "streaming" and frame.height:
        per_step = frame.group_by("train_step").agg(pl.col("minibatch").n_unique().alias("calls"))
        calls = int(per_step["calls"].median())
        if calls < settings.instances:
            chunk = -(-size // settings.instances)
            warnings.append(
                f"each synchronous step's {size} prompts make about {calls} minibatches (--minibatch-size "
                f"{settings.minibatch_size}) for {settings.instances} instances, so {settings.instances - calls} of "
                f"them idle while the step rolls out; verl cuts each batch into one chunk per worker: give "
                f"--minibatch-size {chunk}")
    return warnings
