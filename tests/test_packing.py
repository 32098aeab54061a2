import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asp_cli.arrange.packing import cut_minibatches, length_order, pack


@given(
    lengths=st.lists(st.integers(1, 20000), min_size=1, max_size=300),
    max_prompts=st.integers(1, 40),
    budget_factor=st.floats(1.0, 50.0),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=150, deadline=None)
def test_every_prompt_once_and_limits_held(lengths, max_prompts, budget_factor, seed):
    planned = np.array(lengths, dtype=np.int64)
    footprint = planned * 4
    budget = int(footprint.max() * budget_factor)
    minibatch = pack(planned, footprint, max_prompts=max_prompts, max_tokens=budget,
                     rng=np.random.default_rng(seed))
    assert minibatch.shape == planned.shape
    counts = np.bincount(minibatch)
    assert counts.min() >= 1 and counts.max() <= max_prompts
    assert np.bincount(minibatch, weights=footprint).max() <= budget
    assert set(np.unique(minibatch)) == set(range(counts.size))


@given(lengths=st.lists(st.integers(1, 5000), min_size=2, max_size=200), seed=st.integers(0, 1000))
@settings(max_examples=100, deadline=None)
def test_without_jitter_minibatches_are_length_bands(lengths, seed):
    planned = np.array(lengths)
    minibatch = pack(planned, planned, max_prompts=8, max_tokens=10**9, rng=np.random.default_rng(seed))
    # Minibatch k holds lengths no shorter than any in minibatch k+1: the padding-minimal cut of a sorted list.
    for k in range(minibatch.max()):
        assert planned[minibatch == k].min() >= planned[minibatch == k + 1].max()


def test_same_seed_same_packing_and_seeds_differ():
    rng = np.random.default_rng(0)
    planned = rng.integers(1, 100, 500)  # many ties
    a = pack(planned, planned, max_prompts=16, max_tokens=10**6, rng=np.random.default_rng(7), jitter=0.02)
    b = pack(planned, planned, max_prompts=16, max_tokens=10**6, rng=np.random.default_rng(7), jitter=0.02)
    c = pack(planned, planned, max_prompts=16, max_tokens=10**6, rng=np.random.default_rng(8), jitter=0.02)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_token_budget_cuts_before_prompt_count():
    planned = np.array([100, 100, 100, 100])
    minibatch = cut_minibatches(planned, np.arange(4), max_prompts=4, max_tokens=250)
    assert minibatch.tolist() == [0, 0, 1, 1]


def test_one_prompt_over_budget_is_refused():
    with pytest.raises(ValueError):
        cut_minibatches(np.array([10, 300]), np.arange(2), max_prompts=4, max_tokens=100)


def test_length_order_is_longest_first():
    order = length_order(np.array([5, 50, 1, 20]), np.random.default_rng(0))
    assert order.tolist() == [1, 3, 0, 2]


def test_a_padded_cut_keeps_every_minibatch_within_the_budget_as_the_static_engine_holds_it():
    """The static engine (HF generate) holds every row padded to the longest prompt plus the longest response:
    summing N x (prompt + predicted mean) per group left most minibatches of a tight cache over it."""
    from asp_cli.arrange.packing import PaddedTokens, padded_tokens_of

    rng = np.random.default_rng(4)
    prompt = rng.integers(20, 600, 500)
    top = rng.integers(50, 4000, 500)
    padded = PaddedTokens(prompt, top, 8)
    budget = 120_000
    order = np.argsort(-top, kind="stable")
    minibatch = cut_minibatches(padded, order, max_prompts=32, max_tokens=budget)
    tokens = padded_tokens_of(minibatch, padded)
    assert tokens.max() <= budget
    # Next-fit: no minibatch could have taken the next prompt in order too.
    position = np.empty(500, dtype=np.int64)
    position[order] = np.arange(500)
    for m in range(int(minibatch.max())):
        members = order[minibatch[order] == m]
        following = order[position[members].max() + 1]
        grown = np.append(members, following)
        assert (grown.size > 32
                or 8 * grown.size * (prompt[grown].max() + top[grown].max()) > budget)
    # The sum of the groups' own footprints would have packed them fuller, and over the padded budget.
    summed = cut_minibatches(8 * (prompt + top), order, max_prompts=32, max_tokens=budget)
    assert padded_tokens_of(summed, padded).max() > budget
    with pytest.raises(ValueError):
        cut_minibatches(padded, order, max_prompts=32, max_tokens=int(8 * (prompt + top).max()) - 1)


@given(
    lengths=st.lists(st.integers(1, 20000), min_size=1, max_size=200),
    max_prompts=st.integers(1, 40),
    budget_factor=st.floats(1.0, 50.0),
)
@settings(max_examples=150, deadline=None)
def test_a_dealt_step_holds_every_group_once_within_the_limits(lengths, max_prompts, budget_factor):
    from asp_cli.arrange.packing import deal_minibatches

    work = np.array(lengths, dtype=np.float64)
    footprint = (work * 4).astype(np.int64)
    budget = int(footprint.max() * budget_factor)
    minibatch = deal_minibatches(footprint, work, max_prompts=max_prompts, max_tokens=budget)
    counts = np.bincount(minibatch)
    assert counts.min() >= 1 and counts.max() <= max_prompts
    assert np.bincount(minibatch, weights=footprint).max() <= budget
    load = np.bincount(minibatch, weights=work)
    assert (np.diff(load) <= 1e-9).all()  # numbered heaviest first
    assert np.array_equal(minibatch, deal_minibatches(footprint, work, max_prompts=max_prompts, max_tokens=budget))


def test_a_dealt_step_spreads_its_long_groups_where_a_cut_keeps_them_together():
    from asp_cli.arrange.packing import cut_per_step, deal_minibatches

    # A synchronous step of 64 groups on 4 minibatches of 16: 8 long groups and 56 short ones. Cut longest first,
    # one minibatch holds all 8 long groups (and the step waits for it); dealt, each holds 2.
    work = np.array([9000.0] * 8 + [300.0] * 56)
    footprint = (work * 8).astype(np.int64)
    dealt = deal_minibatches(footprint, work, max_prompts=16, max_tokens=10**9)
    assert np.bincount(dealt[:8], minlength=4).tolist() == [2, 2, 2, 2]
    assert np.bincount(dealt).tolist() == [16, 16, 16, 16]
    cut = cut_per_step(np.arange(64), footprint, 64, 16, 10**9)
    assert np.bincount(cut[:8], minlength=4).tolist() == [8, 0, 0, 0]
    assert np.array_equal(cut_per_step(np.arange(64), footprint, 64, 16, 10**9, work), dealt)
    # Little KV room: the count of minibatches grows until every group fits.
    tight = deal_minibatches(footprint, work, max_prompts=16, max_tokens=int(footprint[0] * 2))
    assert np.bincount(tight, weights=footprint).max() <= footprint[0] * 2 and tight.max() + 1 >= 4


def test_a_synchronous_step_takes_the_dealt_or_the_consecutive_cut_whichever_ends_sooner():
    from asp_cli.arrange.packing import cut_per_step, deal_minibatches, step_makespans

    def run(work, max_prompts, instances):
        def seconds(minibatch, count):  # a blocking minibatch: its longest group, and a little per token
            longest = np.zeros(count)
            np.maximum.at(longest, minibatch, work)
            return longest + 0.1 * np.bincount(minibatch, weights=work, minlength=count)
        footprint = np.full(work.size, 10, dtype=np.int64)
        order = np.arange(work.size)
        chosen = cut_per_step(order, footprint, work.size, max_prompts, 10**9, work, seconds=seconds,
                              instances=instances)
        dealt = deal_minibatches(footprint, work, max_prompts=max_prompts, max_tokens=10**9)
        assert np.array_equal(cut_per_step(order, footprint, work.size, max_prompts, 10**9, work), dealt)
        return chosen, dealt

    # One minibatch per instance (4 of 16 on 4): cut, one holds all 8 long groups (16,440 s); dealt, each holds
    # two (11,220 s).
    chosen, dealt = run(np.array([9000.0] * 8 + [300.0] * 56), 16, 4)
    assert np.array_equal(chosen, dealt)
    # Two minibatches per instance (4 of 4 on 2): dealt, each holds a long group and both instances run two
    # (19,980 s); cut, the long groups share one minibatch and one instance (12,600 s).
    chosen, dealt = run(np.array([300.0] * 6 + [9000.0] * 4 + [300.0] * 6), 4, 2)
    assert not np.array_equal(chosen, dealt)
    assert chosen[6:10].tolist() == [0, 0, 0, 0] and sorted(np.bincount(chosen).tolist()) == [4, 4, 4, 4]
    # Steps keep their turn, each from the cut it takes.
    work = np.array([9000.0] * 8 + [300.0] * 56)
    assert step_makespans(np.array([5.0, 3.0, 3.0, 1.0, 2.0]), np.array([0, 3, 5]), 2).tolist() == [6.0, 2.0]
    both = cut_per_step(np.arange(128), np.full(128, 10), 64, 16, 10**9, np.concatenate([work, work]),
                        seconds=lambda m, c: np.bincount(m, minlength=c).astype(float), instances=4)
    assert both[:64].max() < both[64:].min() and sorted(set(both.tolist())) == list(range(8))


def test_a_synchronous_step_fills_every_instance_while_it_has_groups_enough():
    from asp_cli.arrange.packing import cut_per_step, deal_minibatches

    # 128 groups in minibatches of at most 16 on 16 instances: 16 minibatches of 8, not 8 of 16 with 8 idle
    # instances, dealt or cut; a step of 10 groups gets 10 minibatches of one.
    rng = np.random.default_rng(0)
    work = rng.uniform(100, 9000, 138)
    footprint = np.full(138, 10, dtype=np.int64)
    for kwargs in ({}, {"work": work}, {"work": work, "seconds": lambda m, c: np.bincount(m, minlength=c) * 1.0}):
        local = cut_per_step(np.arange(138), footprint, 128, 16, 10**9, instances=16, **kwargs)
        assert np.unique(local[:128]).tolist() == list(range(16))  # dealt: balanced by work, not by count
        assert np.bincount(local[128:] - 16).tolist() == [1] * 10
    assert np.bincount(cut_per_step(np.arange(138), footprint, 128, 16, 10**9, instances=16)[:128]).tolist() == [8] * 16
    assert np.bincount(cut_per_step(np.arange(128), footprint, 128, 16, 10**9)).tolist() == [16] * 8
    assert deal_minibatches(footprint[:3], work[:3], max_prompts=16, max_tokens=10**9, min_count=16).max() == 2


def test_a_dealt_step_of_groups_without_work_still_makes_min_count_minibatches():
    """Groups predicted to do no work (a step of empty responses) were all dealt to the first minibatch: ties of
    load went by position alone, so min_count was ignored and every other instance idled through the step."""
    from asp_cli.arrange.packing import cut_per_step, deal_minibatches

    footprint = np.full(10, 5, dtype=np.int64)
    dealt = deal_minibatches(footprint, np.zeros(10), max_prompts=16, max_tokens=10**9, min_count=4)
    assert np.bincount(dealt).tolist() == [3, 3, 2, 2]
    some = deal_minibatches(footprint[:4], np.array([5.0, 5.0, 0.0, 0.0]), max_prompts=16, max_tokens=10**9,
                            min_count=4)
    assert sorted(some.tolist()) == [0, 1, 2, 3]
    few = deal_minibatches(footprint[:3], np.zeros(3), max_prompts=16, max_tokens=10**9, min_count=8)
    assert few.tolist() == [0, 1, 2]  # at most one minibatch per group
    step = cut_per_step(np.arange(10), footprint, 10, 16, 10**9, np.zeros(10), instances=4)
    assert np.bincount(step).tolist() == [3, 3, 2, 2]


def test_a_synchronous_step_cut_where_an_even_piece_holds_too_much_kv_still_fills_every_instance():
    from asp_cli.arrange.packing import PaddedTokens, cut_per_step

    # 20 groups on 16 instances: pieces of 1-2; the one holding the 950-token group is over the 1,000-token
    # limit. Only that piece is cut further, so 17 minibatches, not a greedy cut of at most two per call (11 for
    # 16 instances, 5 idle).
    footprint = np.full(20, 100, dtype=np.int64)
    footprint[0] = 950
    local = cut_per_step(np.arange(20), footprint, 20, 16, 1000, instances=16)
    assert local.max() + 1 >= 16 and np.bincount(local, weights=footprint).max() <= 1000
    assert np.bincount(local).max() <= 2 and (np.diff(local) >= 0).all()  # still consecutive pieces
    padded = PaddedTokens(np.full(20, 10), np.where(np.arange(20) == 0, 465, 40), 2)
    local = cut_per_step(np.arange(20), padded, 20, 16, 1000, instances=16)
    assert local.max() + 1 >= 16


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 100), min_size=1, max_size=60), st.integers(1, 70), st.integers(1, 20),
       st.integers(1, 12), st.integers(1, 400), st.integers(0, 1000), st.booleans())
def test_a_synchronous_cut_keeps_its_steps_limits_and_an_instances_worth_of_minibatches(
        lengths, batch, max_prompts, instances, max_tokens, seed, weighed):
    from asp_cli.arrange.packing import cut_per_step

    footprint = np.asarray(lengths, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(footprint.size)
    work = footprint * 3.0 + 1.0
    kwargs = {"work": work, "seconds": lambda m, c: np.bincount(m, weights=work, minlength=c)} if weighed else {}
    if footprint.max() > max_tokens:  # one group alone over the limit: refused, the caller names it
        with pytest.raises(ValueError):
            cut_per_step(order, footprint, batch, max_prompts, max_tokens, instances=instances, **kwargs)
        return
    local = cut_per_step(order, footprint, batch, max_prompts, max_tokens, instances=instances, **kwargs)
    assert np.array_equal(local, cut_per_step(order, footprint, batch, max_prompts, max_tokens,
                                              instances=instances, **kwargs))
    assert np.unique(local).tolist() == list(range(local.max() + 1))  # dense
    assert np.bincount(local).max() <= max_prompts and np.bincount(local, weights=footprint).max() <= max_tokens
    step = np.empty(footprint.size, dtype=np.int64)
    step[order] = np.arange(footprint.size) // batch
    first_step = np.full(local.max() + 1, -1)
    first_step[local] = step
    assert (np.bincount(local, weights=step) == first_step * np.bincount(local)).all()  # no minibatch across steps
    assert (np.diff(first_step) >= 0).all()  # numbered step by step
    for s in np.unique(step):
        assert np.unique(local[step == s]).size >= min(int((step == s).sum()), instances)
