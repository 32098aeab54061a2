"""The choice of finished groups per training step (the core of the verl v1 sampler), without verl."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asp_cli.integrate.step_groups import Group, LagBound, StepPlan, choose

# 12 groups, 4 per step; the schedule's training order differs from the seq (dispatch) order.
STEPS = {0: [2, 5, 7, 9], 1: [0, 1, 4, 10], 2: [3, 6, 8, 11]}
PLAN = StepPlan([s for seqs in STEPS.values() for s in seqs], [t for t, seqs in STEPS.items() for _ in seqs])


def groups(seqs, submitted=1):
    return [Group(key=f"u{s}", seq=s, submitted_step=submitted) for s in seqs]


def test_a_step_takes_exactly_its_groups_and_holds_the_others():
    finished = groups([9, 2, 7, 5, 0, 11])
    choice = choose(PLAN, global_step=1, batch_size=4, finished=finished, inflight_steps=[], trained=set())
    assert choice.ready and choice.take == ["u2", "u5", "u7", "u9"]
    assert choice.counts["scheduled"] == 4 and choice.counts["held_back"] == 2 and choice.refill == 0
    # Step 2 (global) wants step 1's groups: two are finished, two in flight; it waits without asking for more.
    second = choose(PLAN, global_step=2, batch_size=4, finished=groups([0, 11]), inflight_steps=[1, 1, 1],
                    trained={2, 5, 7, 9})
    assert not second.ready and second.waiting_for == [1, 4, 10] and second.refill == 0
    # More groups missing than in flight: some were never submitted, so it asks for them (in refill_size units).
    third = choose(PLAN, global_step=2, batch_size=4, finished=groups([0, 11]), inflight_steps=[1], trained={2, 5, 7, 9},
                   refill_size=4)
    assert third.refill == 4 and not third.ready


def test_the_sync_trainer_drains_in_flight_prompts_first():
    choice = choose(PLAN, global_step=1, batch_size=4, finished=groups([2, 5, 7, 9]), inflight_steps=[1], trained=set(),
                    drain=True)
    assert choice.take == ["u2", "u5", "u7", "u9"] and not choice.ready


def test_calls_of_one_step_split_its_groups_in_order():
    """verl's separate_async calls sample() parameter_sync_step times per step, each for a share of the batch."""
    first = choose(PLAN, global_step=1, batch_size=2, finished=groups([9, 7, 2]), inflight_steps=[1], trained=set())
    assert not first.ready and first.waiting_for == [5] and first.take == ["u2"]
    ready = choose(PLAN, global_step=1, batch_size=2, finished=groups([9, 7, 5, 2]), inflight_steps=[], trained=set())
    assert ready.take == ["u2", "u5"]
    rest = choose(PLAN, global_step=1, batch_size=2, finished=groups([9, 7]), inflight_steps=[], trained={2, 5})
    assert rest.ready and rest.take == ["u7", "u9"]


def test_the_lag_bound_pulls_a_group_forward_and_its_place_waits_one_step():
    bound = LagBound(max_span=2, strategy="wait")
    finished = groups([2, 5, 7, 9]) + [Group("old", 11, submitted_step=1)]
    # At global step 2 the step-2 group submitted at step 1 has span 2: held any longer, it breaks the bound.
    early = groups([0, 1, 4, 10], submitted=2)
    choice = choose(PLAN, global_step=2, batch_size=4, finished=early + [finished[-1]], inflight_steps=[],
                    trained={2, 5, 7, 9}, bound=bound)
    assert choice.ready and choice.take == ["old", "u0", "u1", "u4"]
    assert choice.counts["forced_by_lag"] == 1 and choice.counts["scheduled"] == 3
    # The displaced group goes first at the next step, as a late one.
    later = choose(PLAN, global_step=3, batch_size=4, finished=[early[-1]] + groups([3, 6, 8], submitted=3),
                   inflight_steps=[], trained={2, 5, 7, 9, 11, 0, 1, 4}, bound=bound)
    assert later.take == ["u10", "u3", "u6", "u8"] and later.counts["late"] == 1


def test_wait_blocks_on_a_stale_group_in_flight_and_drop_evicts_a_finished_one():
    wait = choose(PLAN, global_step=3, batch_size=4, finished=groups([2, 5, 7, 9], submitted=3), inflight_steps=[1],
                  trained=set(), bound=LagBound(2, "wait"))
    assert not wait.ready
    drop = choose(PLAN, global_step=3, batch_size=4, finished=groups([2, 5, 7], submitted=3) + groups([9], submitted=1),
                  inflight_steps=[], trained=set(), bound=LagBound(2, "drop"))
    assert drop.evict == ["u9"] and drop.counts["evicted_over_lag"] == 1
    with pytest.raises(ValueError):
        LagBound(0)
    with pytest.raises(ValueError):
        LagBound(2, "hope")


def test_groups_that_came_back_empty_are_written_off_only_when_they_explain_the_gap():
    finished = groups([2, 5, 7])
    waiting = choose(PLAN, global_step=1, batch_size=4, finished=finished, inflight_steps=[], trained=set(),
                     unknown_lost=0)
    assert waiting.refill == 1 and not waiting.ready and waiting.lost == []
    written_off = choose(PLAN, global_step=1, batch_size=4, finished=finished, inflight_steps=[], trained=set(),
                         unknown_lost=1)
    assert written_off.ready and written_off.lost == [9] and written_off.take == ["u2", "u5", "u7"]


def test_a_row_submitted_twice_is_trained_once_from_its_oldest_copy():
    finished = groups([2, 5, 7]) + [Group("new9", 9, 4), Group("old9", 9, 1)]
    choice = choose(PLAN, global_step=1, batch_size=4, finished=finished, inflight_steps=[], trained=set())
    assert choice.take == ["u2", "u5", "u7", "old9"]


def test_past_the_schedule_the_oldest_groups_go_first():
    finished = [Group("b", None, 5), Group("a", 3, 4), Group("c", 1, 5)]
    choice = choose(PLAN, global_step=9, batch_size=2, finished=finished, inflight_steps=[], trained=set())
    assert choice.ready and choice.take == ["a", "b"] and choice.counts["past_schedule"] == 2
    short = choose(PLAN, global_step=9, batch_size=4, finished=finished, inflight_steps=[], trained=set())
    assert not short.ready and short.refill == 1


def test_a_plan_needs_unique_seqs():
    with pytest.raises(ValueError):
        StepPlan([1, 1], [0, 0])
    with pytest.raises(ValueError):
        StepPlan([], [])
    assert PLAN.seqs_of(1) == [0, 1, 4, 10] and PLAN.train_step(1) == 0 and len(PLAN) == 12


def _run(loader: list[int], plan: StepPlan, *, batch: int, steps: int, warmup: int, bound: LagBound | None,
         seed: int) -> list[list[tuple[int, int]]]:
    """A toy trainer: submits a batch per step (plus warmup batches), rollouts finish in random order."""
    rng = random.Random(seed)
    cursor = 0
    inflight: list[Group] = []
    finished: list[Group] = []
    trained: set[int] = set()
    batches = []

    def submit(count: int, step: int) -> None:
        nonlocal cursor
        for _ in range(count):
            seq = loader[cursor % len(loader)]
            inflight.append(Group(f"k{cursor}", seq, step))
            cursor += 1

    submit(warmup * batch, 1)
    for g in range(1, steps + 1):
        submit(batch, g)
        for _ in range(10_000):
            rng.shuffle(inflight)
            for _ in range(rng.randint(0, 3)):
                if inflight:
                    finished.append(inflight.pop())
            choice = choose(plan, global_step=g, batch_size=batch, finished=finished,
                            inflight_steps=[x.submitted_step for x in inflight], trained=trained, bound=bound,
                            drain=bound is None)
            finished = [x for x in finished if x.key not in set(choice.evict)]
            if choice.refill:
                submit(choice.refill, g)
            if choice.ready:
                taken = [x for x in finished if x.key in set(choice.take)]
                finished = [x for x in finished if x.key not in set(choice.take)]
                trained.update(x.seq for x in taken)
                batches.append([(x.seq, g - x.submitted_step + 1) for x in taken])
                break
        else:
            raise AssertionError(f"step {g} never became ready")
    return batches


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(2, 5), st.integers(0, 2**16), st.booleans())
def test_a_toy_trainer_trains_the_schedule_step_by_step(batch, steps, seed, dispatch_order):
    rng = random.Random(seed)
    seqs = list(range(batch * steps))
    rng.shuffle(seqs)
    plan = StepPlan(seqs, [i // batch for i in range(len(seqs))])
    # The loader yields rows in training order, or in seq (dispatch) order, which the sampler refills for.
    loader = sorted(seqs) if dispatch_order else [s for t in range(steps) for s in plan.seqs_of(t)]
    sync = _run(loader, plan, batch=batch, steps=steps, warmup=0, bound=None, seed=seed)
    assert [sorted(s for s, _ in b) for b in sync] == [sorted(plan.seqs_of(t)) for t in range(steps)]
    assert sync == _run(loader, plan, batch=batch, steps=steps, warmup=0, bound=None, seed=seed)
    # Async: one warmup batch ahead, verl's dropless bound. Every row is trained once, in full batches; read in
    # training order (what asp export and ScheduleDataset give) no group is ever trained past the bound.
    bounded = _run(loader, plan, batch=batch, steps=steps, warmup=1, bound=LagBound(2, "wait"), seed=seed)
    trained = [s for b in bounded for s, _ in b]
    assert len(trained) == len(set(trained)) == batch * steps
    assert all(len(b) == batch for b in bounded)
    if not dispatch_order:
        assert all(span <= 2 for b in bounded for _, span in b)
        assert [sorted(s for s, _ in b) for b in bounded] == [sorted(plan.seqs_of(t)) for t in range(steps)]
