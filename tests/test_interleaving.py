import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from asp_cli.arrange.interleaving import (
    balanced_assignment,
    dispatch_order,
    ideal_start_s,
    length_classes,
    list_schedule,
)


def test_classes_have_equal_counts_and_follow_duration():
    duration = np.arange(100, 0, -1, dtype=float)
    classes = length_classes(duration, 4)
    assert np.bincount(classes).tolist() == [25, 25, 25, 25]
    assert classes[0] == 3 and classes[-1] == 0


def test_ideal_starts_let_every_class_finish_inside_the_horizon():
    rng = np.random.default_rng(0)
    duration = rng.lognormal(2, 1, 400)
    classes = length_classes(duration, 8)
    ideal = ideal_start_s(duration, classes, instances=4)
    horizon = duration.sum() / 4
    for c in range(8):
        members = classes == c
        assert (ideal[members] + duration[members].max() <= horizon + 1e-9).all()
        # Longest of the class starts at 0; the rest spread evenly.
        assert ideal[members].min() == 0.0


def test_a_longer_trainer_horizon_spreads_the_long_class_over_it():
    rng = np.random.default_rng(1)
    duration = np.concatenate([rng.uniform(1, 2, 300), rng.uniform(80, 100, 40)])
    classes = length_classes(duration, 4)
    rollout = ideal_start_s(duration, classes, instances=8)
    trainer = ideal_start_s(duration, classes, instances=8, horizon_s=3 * duration.sum() / 8)
    long = classes == classes.max()
    # Spread over three times the rollout horizon, the long class no longer sits in the first stretch.
    assert trainer[long].max() > 2 * rollout[long].max()
    assert trainer[long].max() + duration[long].max() <= 3 * duration.sum() / 8 + 1e-9
    # A horizon shorter than the rollout's own changes nothing.
    np.testing.assert_array_equal(ideal_start_s(duration, classes, instances=8, horizon_s=1.0), rollout)


@given(
    durations=st.lists(st.floats(0.01, 1000.0), min_size=1, max_size=200),
    instances=st.integers(1, 16),
)
@settings(max_examples=150, deadline=None)
def test_list_schedule_is_valid_and_within_grahams_bound(durations, instances):
    duration = np.array(durations)
    classes = length_classes(duration, 8)
    order = dispatch_order(ideal_start_s(duration, classes, instances), duration)
    assert sorted(order.tolist()) == list(range(duration.size))
    instance, start, free = list_schedule(order, duration, np.zeros(instances))
    assert ((instance >= 0) & (instance < instances)).all()
    # No overlap on an instance; each runs its minibatches back to back in dispatch order.
    for k in range(instances):
        mine = order[instance[order] == k]
        ends = start[mine] + duration[mine]
        assert np.all(start[mine][1:] >= ends[:-1] - 1e-9)
    makespan = free.max()
    # List scheduling: makespan <= sum/K + max (Graham 1966), whatever the order.
    assert makespan <= duration.sum() / instances + duration.max() + 1e-6


def test_dispatch_puts_long_work_first_on_distinct_instances():
    duration = np.array([1.0] * 40 + [30.0, 29.0, 28.0, 27.0])
    classes = length_classes(duration, 4)
    order = dispatch_order(ideal_start_s(duration, classes, 4), duration)
    instance, start, _ = list_schedule(order, duration, np.zeros(4))
    longest = np.argsort(-duration)[:4]
    assert start[longest[0]] == 0.0
    first_four = order[:4]
    assert len(set(instance[first_four].tolist())) == 4


@given(
    durations=st.lists(st.floats(0.01, 1000.0), min_size=1, max_size=200),
    instances=st.integers(1, 16),
    slack=st.integers(0, 2),
)
@settings(max_examples=150, deadline=None)
def test_balanced_assignment_is_valid_and_balances_classes(durations, instances, slack):
    duration = np.array(durations)
    classes = length_classes(duration, 8)
    order = dispatch_order(ideal_start_s(duration, classes, instances), duration)
    instance, start, free = balanced_assignment(order, duration, classes, np.zeros(instances), slack=slack)
    assert ((instance >= 0) & (instance < instances)).all()
    for k in range(instances):
        mine = order[instance[order] == k]
        ends = start[mine] + duration[mine]
        assert np.all(start[mine][1:] >= ends[:-1] - 1e-9)
        assert np.isclose(free[k], duration[mine].sum())
    # Outside the last 2K (placed freely), no instance holds more than slack + 1 above another per class.
    constrained = order[: max(order.size - 2 * instances, 0)]
    for c in np.unique(classes):
        counts = np.bincount(instance[constrained[classes[constrained] == c]], minlength=instances)
        assert counts.max() - counts.min() <= slack + 1


def test_balanced_assignment_spreads_a_class_that_list_scheduling_stacks():
    # Two instances; class 1 (long) would all go to whichever instance short work leaves free.
    duration = np.array([10.0, 1.0, 1.0, 10.0, 1.0, 1.0, 10.0, 10.0, 1.0, 1.0, 1.0, 1.0])
    classes = (duration > 5).astype(np.int32)
    order = np.arange(duration.size)
    instance, _, _ = balanced_assignment(order, duration, classes, np.zeros(2), slack=0)
    long_counts = np.bincount(instance[:8][classes[:8] == 1], minlength=2)
    assert long_counts.tolist() == [2, 2]


def test_warm_start_sends_the_shortest_train_batch_first():
    duration = np.array([50.0, 40.0, 3.0, 30.0, 1.0, 2.0, 20.0, 10.0])
    groups = np.array([8, 8, 8, 8, 8, 8, 8, 8])
    classes = length_classes(duration, 4)
    ideal = ideal_start_s(duration, classes, 2, groups=groups, warm_groups=16)
    order = dispatch_order(ideal, duration)
    assert order[:2].tolist() == [4, 5]  # the two shortest hold 16 groups, shortest first
    assert order[2] == 0  # then the longest
    assert np.array_equal(ideal_start_s(duration, classes, 2), ideal_start_s(duration, classes, 2, warm_groups=0))


def test_list_schedule_starts_each_synchronous_step_from_instances_all_free():
    from asp_cli.arrange.interleaving import list_schedule

    duration = np.array([5.0, 1.0, 1.0, 4.0, 4.0])
    step = np.array([0, 0, 0, 1, 1])
    # Without steps the second step's minibatches go where the first left room (instance 1 twice).
    instance, start, free = list_schedule(np.arange(5), duration, np.zeros(2))
    assert instance.tolist() == [0, 1, 1, 1, 0] and start.tolist() == [0.0, 0.0, 1.0, 2.0, 5.0]
    # With them, step 1 waits for step 0's last minibatch (5 s) and takes both instances.
    instance, start, free = list_schedule(np.arange(5), duration, np.zeros(2), step)
    assert instance.tolist() == [0, 1, 1, 0, 1] and start.tolist() == [0.0, 0.0, 1.0, 5.0, 5.0]
    assert free.tolist() == [9.0, 9.0]
