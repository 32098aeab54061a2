"""Scheduler settings: one frozen dataclass, validated once, recorded in every schedule.

Defaults suit a 7B model on 80 GB GPUs (the `h100-qwen2.5-7b` preset): 4 rollout instances, GRPO groups of
8, 128 prompts per training step, minibatches of up to 32 prompts (256 sequences, where an H100 decode step
is still cheap) whose predicted KV footprint fits the instance's cache, and an 8k generation cap.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from asp_cli.errors import SettingsError

PlanWith = Literal["max", "mean"]
MAX_SETTING = 2**31 - 1  # the largest count or token budget a setting may hold


@dataclass(frozen=True)
class ScheduleSettings:
    """Everything that shapes a schedule besides the prompts and the predictions."""

    instances: int = 4
    samples_per_prompt: int = 8
    epochs: int = 1
    train_batch_size: int = 128
    minibatch_size: int = 32
    max_tokens_per_minibatch: int | None = None  # None: the preset's KV-cache capacity
    max_response_tokens: int = 8192
    max_lag: int | None = None
    seed: int = 0
    plan_with: PlanWith = "max"
    preset: str = "h100-qwen2.5-7b"
    length_classes: int = 8
    canonical_order: bool = False  # arrange as if the prompts came sorted by id: input row order cannot matter

    def __post_init__(self) -> None:
        positive = {
            "instances": ("--instances", self.instances),
            "samples_per_prompt": ("--samples-per-prompt", self.samples_per_prompt),
            "epochs": ("--epochs", self.epochs),
            "train_batch_size": ("--train-batch-size", self.train_batch_size),
            "minibatch_size": ("--minibatch-size", self.minibatch_size),
            "max_response_tokens": ("--max-response-tokens", self.max_response_tokens),
            "length_classes": ("--length-classes", self.length_classes),
        }
        for flag, value in positive.values():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SettingsError(f"{flag} must be a whole number of at least 1 (got {value!r})")
        optional = {"max_tokens_per_minibatch": self.max_tokens_per_minibatch, "max_lag": self.max_lag}
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise SettingsError(f"--seed must be a whole number (got {self.seed!r})")
        for name, value in optional.items():
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise SettingsError(f"--{name.replace('_', '-')} must be a whole number (got {value!r})")
        if not isinstance(self.preset, str) or not isinstance(self.canonical_order, bool):
            raise SettingsError(f"--preset must be a name or a file, and --canonical-order a flag (got "
                                f"{self.preset!r}, {self.canonical_order!r})")
        if self.max_tokens_per_minibatch is not None and self.max_tokens_per_minibatch < 1:
            raise SettingsError(
                f"--max-tokens-per-minibatch must be at least 1 (got {self.max_tokens_per_minibatch})"
            )
        bounded = {**positive, "max_tokens_per_minibatch": ("--max-tokens-per-minibatch", self.max_tokens_per_minibatch),
                   "max_lag": ("--max-lag", self.max_lag)}
        for flag, value in bounded.values():
            if isinstance(value, int) and value > MAX_SETTING:  # beyond 64-bit arithmetic downstream
                raise SettingsError(f"{flag} must be at most {MAX_SETTING} (got {value})")
        if self.max_lag is not None and self.max_lag < 0:
            raise SettingsError(f"--max-lag must be 0 or more (got {self.max_lag})")
        if not isinstance(self.plan_with, str) or self.plan_with not in ("max", "mean"):
            raise SettingsError(f"--plan-with must be 'max' or 'mean' (got {self.plan_with!r})")
        if self.seed < 0:
            raise SettingsError(f"--seed must be 0 or more (got {self.seed})")
        if self.instances > 100_000:
            raise SettingsError(f"--instances {self.instances} is not a rollout fleet; give at most 100000")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ScheduleSettings:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})
