"""asp: the Adaptive Scheduling Pipeline, offline rollout schedules for LLM reinforcement-learning training."""

from __future__ import annotations

__version__ = "0.1.0"
