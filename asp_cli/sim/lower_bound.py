"""The physical lower bound of a rollout-and-train run under asp's cost model.

No arrangement of the same work on the same machines can finish sooner (docs/simulation.md, "Lower bound";
../shared/docs/rollout-cost-model.md section 4.1, the P||Cmax bound max(sum/m, max p_j) carried over to
decode steps):

* **decode work** (memory side): every decode step is full (``max_num_seqs`` live), every instance is busy,
  every token reads its whole context once: ``[T/B_cap·(t_o + t_w) + kv·Σ(P·L + L(L+1)/2) + prefill] / K``.
* **compute**: the same with the GEMM compute cap instead of the weight read: ``[T/B_cap·t_o + c·T + ...] / K``.
* **longest request**: one sequence running alone, ``prefill(P) + L·(t_o + t_w) + kv·(P·L + L(L+1)/2)``.
* **trainer**: every step back to back with its weight sync, the trainer never waiting.
* **rollout then last step**: the last training step starts after the last sample is generated and is no
  shorter than the cheapest batch it could hold.
* **synchronous** (``max_lag`` 0): rollout and training alternate, every step's rollout waiting for the weights
  the step before published, so the run is at least the rollout bound plus every step's training and sync. (The
  decode-work and compute terms add up over steps, and the longest request lies in one of them, so the steps'
  rollouts together are no shorter than the whole work's bound.) Without it `asp simulate` read a synchronous
  run as bound by the trainer while the trainer sat idle 63% of it.

The simulator (`asp_cli.sim`) charges at least each of these, so its result is never below the bound;
``tests/test_lower_bound.py`` checks that on random schedules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from asp_cli.costmodel import HardwarePreset


@dataclass(frozen=True)
class LowerBound:
    """The bound's terms in seconds and which one binds."""

    rollout_s: float
    rollout_terms_s: dict[str, float] = field(default_factory=dict)
    rollout_binding: str = ""
    end_to_end_s: float = 0.0
    end_to_end_terms_s: dict[str, float] = field(default_factory=dict)
    end_to_end_binding: str = ""

    def to_dict(self) -> dict:
        return {
            "lower_bound_rollout_s": self.rollout_s,
            "lower_bound_rollout_terms_s": dict(self.rollout_terms_s),
            "lower_bound_rollout_binding": self.rollout_binding,
            "lower_bound_end_to_end_s": self.end_to_end_s,
            "lower_bound_end_to_end_terms_s": dict(self.end_to_end_terms_s),
            "lower_bound_end_to_end_binding": self.end_to_end_binding,
        }


def batch_cap(preset: HardwarePreset, prompt_tokens: np.ndarray) -> int:
    """Most sequences one decode step can hold: ``max_num_seqs``, or fewer when even the shortest prompts
    cannot all sit in the KV cache at once."""
    cap = int(preset.max_num_seqs)
    smallest = float(np.min(prompt_tokens)) + 1.0 if np.size(prompt_tokens) else 1.0
    if preset.kv_capacity_tokens > 0:
        cap = min(cap, max(int(preset.kv_capacity_tokens // smallest), 1))
    return max(cap, 1)


def rollout_lower_bound(
    preset: HardwarePreset, response_tokens: np.ndarray, prompt_tokens: np.ndarray, instances: int
) -> tuple[float, dict[str, float], str]:
    """Lower bound on the rollout makespan of sequences with these lengths on ``instances`` instances.

    ``response_tokens`` and ``prompt_tokens`` are per sequence (a prompt's N samples are N sequences).
    Returns ``(seconds, terms, binding_term)``.
    """
    lengths = np.maximum(np.asarray(response_tokens, dtype=np.float64), 1.0)
    prompts = np.asarray(prompt_tokens, dtype=np.float64)
    if lengths.size == 0:
        return 0.0, {"decode_work": 0.0, "compute": 0.0, "longest_request": 0.0}, "decode_work"
    total = float(lengths.sum())
    steps = total / batch_cap(preset, prompts)
    kv = preset.kv_s_per_token * float(np.sum(prompts * lengths + lengths * (lengths + 1) / 2))
    prefill = float(preset.prefill_seconds(prompts.sum()))
    memory = (steps * (preset.step_overhead_s + preset.weight_read_s) + kv + prefill) / instances
    compute = (steps * preset.step_overhead_s + preset.compute_s_per_token * total + kv + prefill) / instances
    alone = (
        preset.prefill_seconds(prompts)
        + lengths * (preset.step_overhead_s + max(preset.weight_read_s, preset.compute_s_per_token))
        + preset.kv_s_per_token * (prompts * lengths + lengths * (lengths + 1) / 2)
    )
    terms = {"decode_work": memory, "compute": compute, "longest_request": float(alone.max())}
    binding = max(terms, key=lambda k: terms[k])
    return terms[binding], terms, binding


def lower_bound(
    preset: HardwarePreset,
    response_tokens: np.ndarray,
    prompt_tokens: np.ndarray,
    group_tokens: np.ndarray,
    *,
    instances: int,
    train_batch_size: int,
    synchronous: bool = False,
) -> LowerBound:
    """The end-to-end bound: rollout bound plus the trainer terms (with ``synchronous``, rollout and training in
    turn, never overlapping).

    Parameters
    ----------
    response_tokens, prompt_tokens
        Per sequence.
    group_tokens
        Per group (one prompt in one epoch): prompt and response tokens of all its samples, what the trainer
        is charged for.
    """
    rollout, rollout_terms, rollout_binding = rollout_lower_bound(preset, response_tokens, prompt_tokens,
                                                                  instances)
    groups = np.asarray(group_tokens, dtype=np.float64)
    n_groups = groups.size
    if n_groups == 0:
        return LowerBound(rollout, rollout_terms, rollout_binding, rollout, {"rollout": rollout}, "rollout")
    steps = -(-n_groups // train_batch_size)
    trainer = (
        steps * preset.train_fixed_s
        + preset.train_per_token_s * float(groups.sum())
        + (steps - 1) * preset.weight_sync_s
    )
    last_size = n_groups - (steps - 1) * train_batch_size
    cheapest_last = float(preset.train_step_seconds(np.sort(groups)[:last_size].sum()))
    e2e_terms = {"trainer": trainer, "rollout_then_last_step": rollout + cheapest_last}
    if synchronous:
        e2e_terms["rollout_and_training_in_turn"] = rollout + trainer
    binding = max(e2e_terms, key=lambda k: e2e_terms[k])
    if binding == "rollout_then_last_step":
        binding = f"rollout ({rollout_binding}) then last step"
    elif binding == "rollout_and_training_in_turn":
        binding = f"rollout ({rollout_binding}) and training in turn"
    return LowerBound(rollout, rollout_terms, rollout_binding, max(e2e_terms.values()), e2e_terms, binding)
