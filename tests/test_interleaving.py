import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from asp_cli.interleaving import dispatch_order, ideal_start_s, length_classes, list_schedule


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
