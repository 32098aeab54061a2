"""The facts of a schedule people and scripts want first (`asp schedule`'s summary): sizes, padding, balance, the
trainer's share and lag, and auto's choice."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from asp_cli.arrange.choose import ArrangementChoice
from asp_cli.arrange.timeline import busy_seconds, group_tokens
from asp_cli.costmodel import HardwarePreset
from asp_cli.arrange.made_for import made_for
from asp_cli.settings import ScheduleSettings
from asp_cli.sim.metrics import minibatch_padding



def summarize(frame: pl.DataFrame, settings: ScheduleSettings, preset: HardwarePreset,
              choice: ArrangementChoice | None = None) -> dict[str, Any]:
    """The few facts people and scripts want first: sizes, padding, balance, lag, and with auto's ``choice``
    the candidates and the rollout its replays expect (which then says whether the trainer binds)."""
    n = settings.samples_per_prompt
    per_mb = frame.group_by("minibatch").agg(
        pl.col("instance").first(),
        pl.col("expected_start_s").first().alias("start"),
        pl.col("expected_minibatch_end_s").first().alias("end"),
        pl.len().alias("prompts"),
    )
    # Predicted padding: slot-steps a static batch of each minibatch would leave idle.
    padding = minibatch_padding(frame["minibatch"].to_numpy(), frame["predicted_tokens"].to_numpy())
    # Every planned instance, idle ones too (0 s): counted only where they had work, 20 prompts on 4 instances
    # read "imbalance 1.000" where `asp report` showed three idle.
    instance = per_mb["instance"].to_numpy().astype(np.int64)
    busy_s = busy_seconds(instance, per_mb["start"].to_numpy(), per_mb["end"].to_numpy(), settings.instances)
    end_s = np.zeros(settings.instances, dtype=np.float64)
    np.maximum.at(end_s, instance, per_mb["end"].to_numpy().astype(np.float64))
    makespan = float(end_s.max()) if end_s.size else 0.0
    # The trainer's own work, steps back to back: when it exceeds rollout, the trainer binds, groups queue
    # up and lag grows unless --max-lag holds rollout back.
    step = frame["train_step"].to_numpy()
    step_tokens = np.bincount(step, weights=group_tokens(n, frame["prompt_tokens"].to_numpy(),
                                                         frame["predicted_mean_tokens"].to_numpy()))
    step_tokens = step_tokens[np.bincount(step) > 0]
    step_s = preset.train_step_seconds(step_tokens) + preset.weight_sync_s
    trainer_s = float(np.sum(step_s))
    # Synchronous, the makespan (the last minibatch's end) holds the training of every step but the last, which
    # starts after it: what is left of the makespan without that training is the rollout's share.
    rollout_share = makespan - (trainer_s - float(step_s[-1])) if step_s.size else makespan
    prompts = int(frame.filter(pl.col("epoch") == 0).height)
    # Under a lag bound the replays' rollout waits for the trainer: it says nothing of which one binds.
    replayed = (choice.expected_rollout_s() if choice is not None and settings.max_lag is None
                else None)
    deal = made_for(settings)
    return {
        "prompts": prompts,
        "epochs": settings.epochs,
        "rows": frame.height,
        "instances": settings.instances,
        "samples_per_prompt": n,
        "preset": preset.name, "kv_capacity_tokens": preset.kv_capacity_tokens,  # what the plan was priced with
        "minibatches": int(per_mb.height),
        "train_steps": int(frame["train_step"].max()) + 1,
        "predicted_padding_fraction": round(padding, 4),
        "predicted_rollout_makespan_s": round(makespan, 3),
        "predicted_instance_busy_s": [round(float(x), 3) for x in busy_s],
        "predicted_instance_finish_spread_s": round(float(end_s.max() - end_s.min()), 3) if end_s.size else 0.0,
        "predicted_instance_imbalance": round(float(busy_s.max() / busy_s.mean()), 4) if busy_s.any() else 1.0,
        "idle_instances": int(settings.instances - np.unique(instance).size),
        "predicted_trainer_busy_s": round(trainer_s, 3),
        # Synchronous, rollout and training alternate and the makespan holds both: the trainer binds where its
        # share is the larger (a newcomer read "trainer_bound": false where training took 202 s of 232). Its last
        # step is not in the makespan: taking it out too read a step of 20 s of rollout and 12 s of training as
        # trainer-bound.
        "trainer_bound": bool(trainer_s > (rollout_share if settings.max_lag == 0 else
                                           makespan if replayed is None else replayed)),
        **({"expected_rollout_s": replayed} if replayed is not None else {}),
        **({"arrangement": choice.to_dict()} if choice is not None else {}),
        "max_lag": settings.max_lag,
        **({"verl_trainer": settings.verl_trainer} if settings.verl_trainer else {}),  # `--verl-trainer`
        # whose deal the plan was made for, where it is one framework's: absent otherwise, as before it existed
        **({"made_for": deal} if deal else {}),
        "expected_lag_mean": round(float(frame["expected_lag"].mean()), 3),
        "expected_lag_max": int(frame["expected_lag"].max()),
        "prompts_from_history": int(frame.filter((pl.col("epoch") == 0) & (pl.col("prediction_source") == "history")).height),
    }
