"""Which finished rollout groups a trainer takes at each step: the schedule's ``train_step``, under a lag bound.

The pure core of `asp_cli.integrate.verl_sampler.ScheduleReplayBuffer` (verl's
``trainer.v1.sampler.custom_sampler``), kept free of verl, TransferQueue and torch so it is tested on its own.

A `StepPlan` holds the schedule's assignment of groups (rows, by their unique ``seq``) to training steps.
`choose` looks at the groups that have finished rolling out and says which ones the next call trains:

- **In the schedule's order.** Groups are trained in (``train_step``, ``seq``) order, ``batch_size`` per call;
  the trainer's global step ``g`` (1-based, verl's ``global_steps``) is schedule step ``first_step + g - 1``,
  and the call waits for that step's groups, so without the exceptions below each step trains exactly the
  groups the schedule assigns to it. Groups of earlier steps still waiting (taken out of their step by the
  lag bound's rule) go first.
- **Under the lag bound** (``LagBound``, verl's ``max_off_policy_threshold`` and ``max_off_policy_strategy``;
  span = ``g - submitted_step + 1``): finished groups whose span has reached the bound (held any longer, they
  would break it) go first, oldest first, whatever their step; a step's own groups they displace wait for
  the next call. With ``wait``, no call returns while an unfinished group has reached the bound (verl's
  dropless rule); with ``drop``, a group that finished already past the bound is evicted, as verl's own buffer
  does. The bound holds as long as no more groups reach it at once than one call trains.
- **Nothing silently lost.** Every decision is counted (`Choice.counts`); a finished group with no sample
  (all its rollouts failed) whose row cannot be told is written off only when nothing else can explain the
  groups still missing.

Past the schedule's last step the call falls back to verl's own rule: the oldest finished groups first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

STRATEGIES = ("drop", "wait")


@dataclass(frozen=True)
class Group:
    """One prompt group as the trainer's buffer holds it.

    ``key`` is the buffer's id of the group (verl: the prompt's uid); ``seq`` the schedule row it rolls out
    (None when no sample of it came back to tell); ``submitted_step`` the global step it was submitted at.
    """

    key: str
    seq: int | None
    submitted_step: int


@dataclass(frozen=True)
class LagBound:
    """verl's staleness bound: a group submitted at step ``s`` may train at step ``g`` if ``g - s + 1 <= max_span``."""

    max_span: int
    strategy: str = "drop"

    def __post_init__(self) -> None:
        if not isinstance(self.max_span, int) or self.max_span < 1:
            raise ValueError(f"the lag bound must be a whole number of at least 1 (got {self.max_span!r})")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"the lag strategy must be one of {', '.join(STRATEGIES)} (got {self.strategy!r})")


@dataclass
class Choice:
    """What one call does: train ``take`` (group keys, in order), evict ``evict``, ask for ``refill`` prompts,
    write off the rows in ``lost``; ``ready`` says whether ``take`` is final or the call should poll again."""

    take: list[str] = field(default_factory=list)
    evict: list[str] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    refill: int = 0
    ready: bool = False
    waiting_for: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


class StepPlan:
    """The schedule's groups in training order: ``seq`` by ``train_step``.

    Parameters
    ----------
    seqs, steps
        One entry per schedule row: its unique ``seq`` and its ``train_step``.
    """

    def __init__(self, seqs: Sequence[int] | np.ndarray, steps: Sequence[int] | np.ndarray) -> None:
        seqs = np.asarray(seqs, dtype=np.int64)
        steps = np.asarray(steps, dtype=np.int64)
        if seqs.shape != steps.shape or seqs.size == 0:
            raise ValueError("a step plan needs one train step per seq, and at least one")
        if np.unique(seqs).size != seqs.size:
            raise ValueError("a step plan's seqs must be unique")
        order = np.lexsort((seqs, steps))
        self.seqs = seqs[order]
        self.steps = steps[order]
        self._step_of = dict(zip(self.seqs.tolist(), self.steps.tolist(), strict=True))
        self.first_step = int(self.steps[0])
        self.last_step = int(self.steps[-1])

    def __len__(self) -> int:
        return int(self.seqs.size)

    def __contains__(self, seq: object) -> bool:
        return seq in self._step_of

    def step_of(self, seq: int) -> int:
        return self._step_of[seq]

    def train_step(self, global_step: int) -> int:
        """The schedule step that the trainer's 1-based ``global_step`` trains."""
        return self.first_step + int(global_step) - 1

    def seqs_of(self, step: int) -> list[int]:
        """The groups the schedule assigns to ``step``, in ``seq`` order."""
        lo, hi = np.searchsorted(self.steps, [step, step + 1])
        return self.seqs[lo:hi].tolist()

    def following(self, step: int, trained: set[int], count: int, skip: set[int]) -> list[int]:
        """The next ``count`` groups from ``step`` on, in training order, that are neither trained nor in ``skip``."""
        out: list[int] = []
        start = int(np.searchsorted(self.steps, step))
        for seq in self.seqs[start:].tolist():
            if len(out) == count:
                break
            if seq not in trained and seq not in skip:
                out.append(seq)
        return out


def choose(
    plan: StepPlan,
    *,
    global_step: int,
    batch_size: int,
    finished: Sequence[Group],
    inflight_steps: Sequence[int],
    trained: set[int],
    bound: LagBound | None = None,
    drain: bool = False,
    refill_size: int = 1,
    unknown_lost: int = 0,
) -> Choice:
    """Decide one call of the sampler from what the buffer holds now.

    Parameters
    ----------
    plan
        The schedule's steps.
    global_step
        The trainer's step (1-based).
    batch_size
        Groups this call trains (verl: ``train_batch_size // parameter_sync_step``).
    finished
        The buffer's finished groups (any status but pending or running), each once.
    inflight_steps
        The submission step of every group still pending or running.
    trained
        The seqs already trained by this sampler (never taken again).
    bound
        The lag bound, or None (verl's sync trainer: it is on-policy and ignores the bound).
    drain
        Return only when nothing is in flight (verl's sync trainer puts the rollout to sleep after sampling).
    refill_size
        Prompts are asked for in multiples of this (verl: ``data.gen_batch_size``).
    unknown_lost
        Finished groups with no sample and no readable row (not in ``finished``) not yet written off.

    Returns
    -------
    Choice
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1 (got {batch_size!r})")
    span = {g.key: global_step - g.submitted_step + 1 for g in finished}
    evict = [g.key for g in finished if bound is not None and bound.strategy == "drop" and span[g.key] > bound.max_span]
    gone = set(evict)
    live = [g for g in finished if g.key not in gone]
    blocked = bound is not None and bound.strategy == "wait" and any(
        global_step - s + 1 >= bound.max_span for s in inflight_steps)
    step = plan.train_step(global_step)
    if step > plan.last_step:
        return _past_the_plan(live, evict, batch_size, len(inflight_steps), blocked, drain, refill_size)

    # One group per schedule row: the oldest submission of it (a dataloader that wraps submits rows again).
    by_seq: dict[int, Group] = {}
    for g in sorted(live, key=lambda g: (g.submitted_step, g.key)):
        if g.seq is not None and g.seq in plan and g.seq not in trained:
            by_seq.setdefault(g.seq, g)
    # Groups the bound forbids holding any longer go first, oldest first; the rest follow in training order.
    forced = sorted((g for g in by_seq.values() if bound is not None and span[g.key] >= bound.max_span),
                    key=lambda g: (g.submitted_step, plan.step_of(g.seq), g.seq))[:batch_size]
    forced_seqs = {g.seq for g in forced}
    late = sorted((s for s, g in by_seq.items() if plan.step_of(s) < step and s not in forced_seqs),
                  key=lambda s: (plan.step_of(s), s))[:batch_size - len(forced)]
    wanted = late + plan.following(step, trained, batch_size - len(forced) - len(late), forced_seqs)
    waiting = [s for s in wanted if s not in by_seq]

    choice = Choice(evict=evict)
    inflight = len(inflight_steps)
    if waiting and inflight == 0 and unknown_lost >= len(waiting):
        # Nothing is in flight and as many groups came back empty as are missing: those are the missing ones.
        choice.lost = list(waiting)
        wanted = [s for s in wanted if s not in set(waiting)]
        waiting = []
    elif len(waiting) > inflight:
        short = len(waiting) - inflight - unknown_lost if inflight == 0 else len(waiting) - inflight
        if short > 0:
            choice.refill = -(-short // refill_size) * refill_size
    choice.waiting_for = waiting
    choice.take = [g.key for g in forced] + [by_seq[s].key for s in wanted if s in by_seq]
    choice.ready = not waiting and not blocked and not (drain and inflight) and choice.refill == 0
    taken = set(choice.take)
    chosen = [g.seq for g in forced] + [s for s in wanted if s in by_seq]
    choice.counts = {
        "scheduled": sum(1 for s in chosen if plan.step_of(s) == step),
        "late": sum(1 for s in chosen if plan.step_of(s) < step),
        "early": sum(1 for s in wanted if s in by_seq and plan.step_of(s) > step),
        "forced_by_lag": sum(1 for g in forced if plan.step_of(g.seq) > step),
        "evicted_over_lag": len(evict),
        "lost": len(choice.lost),
        "held_back": sum(1 for g in by_seq.values() if g.key not in taken),
    }
    return choice


def _past_the_plan(
    live: list[Group], evict: list[str], batch_size: int, inflight: int, blocked: bool, drain: bool, refill_size: int,
) -> Choice:
    """verl's own rule once the schedule is used up: the oldest finished groups first."""
    oldest = sorted(live, key=lambda g: (g.submitted_step, -1 if g.seq is None else g.seq, g.key))[:batch_size]
    choice = Choice(take=[g.key for g in oldest], evict=evict)
    if len(oldest) < batch_size and inflight == 0:
        choice.refill = -(-(batch_size - len(oldest)) // refill_size) * refill_size
    choice.ready = len(oldest) == batch_size and not blocked and not (drain and inflight)
    choice.counts = {"past_schedule": len(oldest), "evicted_over_lag": len(evict)}
    return choice
