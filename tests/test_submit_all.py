"""asp_cli.sim.submit_all: verl's synchronous rollout, every request routed when its train batch is submitted."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from asp_cli.costmodel import load_preset
from asp_cli.errors import SettingsError
from asp_cli.sim.engine import Engine
from asp_cli.sim.records import SimulationSettings, Stats
from asp_cli.sim.submit_all import acquisition_order, replay_submit_all, route


def test_acquisition_order_interleaves_the_workers_contiguous_chunks():
    # legacy: the repeated batch of 10 samples (5 prompts x 2) by array_split into 3: [0..3], [4..6], [7..9];
    # the workers take turns, a sample each.
    assert acquisition_order(5, 2, 3, "legacy").tolist() == [0, 4, 7, 1, 5, 8, 2, 6, 9, 3]
    # v1: the 5 prompts by torch.chunk into chunks of 2 (prompts 0-1, 2-3, 4); a turn is one prompt's 2 sessions.
    assert acquisition_order(5, 2, 3, "v1").tolist() == [0, 1, 4, 5, 8, 9, 2, 3, 6, 7]
    assert acquisition_order(2, 2, 8, "legacy").tolist() == [0, 1, 2, 3]  # fewer samples than workers
    assert acquisition_order(2, 2, 8, "v1").tolist() == [0, 1, 2, 3]
    for rule in ("v1", "legacy"):
        assert sorted(acquisition_order(125, 8, 8, rule).tolist()) == list(range(1000))


def test_least_pending_at_submission_deals_one_request_per_server_per_round():
    order = acquisition_order(37, 1, 8)
    server = route(order, routing="least-pending", instances=4, rng=np.random.default_rng(0))
    in_order = server[order]
    for r in range(0, 36, 4):
        assert sorted(in_order[r:r + 4].tolist()) == [0, 1, 2, 3]  # each round a permutation
    counts = np.bincount(server, minlength=4)
    assert counts.max() - counts.min() <= 1
    again = route(order, routing="least-pending", instances=4, rng=np.random.default_rng(0))
    assert again.tolist() == server.tolist()


def test_planned_and_length_aware_routing():
    order = acquisition_order(6, 1, 2, "legacy")
    planned = route(order, routing="planned", instances=3, rng=np.random.default_rng(0),
                    planned=np.array([0, 1, 2, 3, 4, 5]))
    assert planned.tolist() == [0, 1, 2, 0, 1, 2]  # modulo the servers
    # Acquisition order 0, 3, 1, 4, 2, 5: the long request 0 fills server 0, the rest go to server 1.
    predicted = np.array([100.0, 1, 1, 1, 1, 1])
    aware = route(order, routing="length-aware", instances=2, rng=np.random.default_rng(0), predicted=predicted)
    assert aware.tolist() == [0, 1, 1, 1, 1, 1]
    with pytest.raises(SettingsError, match="routing must be one of"):
        route(order, routing="random", instances=2, rng=np.random.default_rng(0))
    with pytest.raises(SettingsError, match="planned instance"):
        route(order, routing="planned", instances=2, rng=np.random.default_rng(0))


def _by_hand(preset, lengths, prompts) -> float:
    finish = np.zeros(len(lengths))
    engine = Engine(preset, SimulationSettings(1, 1, mode="streaming"), Stats(), finish, np.zeros(len(lengths)))
    engine.feed(range(len(lengths)), list(lengths), list(prompts))
    engine.run(drain=True)
    return engine.t


def test_one_server_is_its_engine_run_to_empty_and_the_serving_order_matters():
    preset = dataclasses.replace(load_preset(), max_num_seqs=2)
    # One prompt of 4 samples: 400, 10, 10, 400 (the legacy trainer cuts the repeated batch). Two workers' chunks
    # [400, 10] and [10, 400] arrive as 400, 10, 10, 400 (fcfs); priority serves the batch positions' order.
    lengths = np.array([[400, 10, 10, 400]])
    common = dict(instances=1, train_batch_size=1, response_tokens=lengths, prompt_tokens=np.array([50]), workers=2,
                  chunking="legacy")
    fcfs = replay_submit_all(preset, **common, serving="fcfs")
    assert fcfs.rollout_s[0] == pytest.approx(_by_hand(preset, [400, 10, 10, 400], [50] * 4))
    tokens = 4 * 50 + 820
    assert fcfs.train_s[0] == pytest.approx(float(preset.train_step_seconds(tokens)) + preset.weight_sync_s)
    assert fcfs.end_to_end_s == pytest.approx(fcfs.rollout_s[0] + fcfs.train_s[0])
    # Four workers: chunks of one, the same arrival; sorted positions [400, 400, 10, 10] start both long first.
    sorted_rows = np.array([[400, 400, 10, 10]])
    by_priority = replay_submit_all(preset, **{**common, "response_tokens": sorted_rows, "workers": 4},
                                    serving="priority")
    assert by_priority.rollout_s[0] == pytest.approx(_by_hand(preset, [400, 400, 10, 10], [50] * 4))
    assert by_priority.rollout_s[0] < fcfs.rollout_s[0]


def test_steps_are_consecutive_train_batches_and_groups_spread_over_servers():
    preset = load_preset()
    rng = np.random.default_rng(3)
    lengths = rng.integers(50, 2000, size=(10, 8))
    prompts = np.full(10, 100)
    free = replay_submit_all(preset, instances=4, train_batch_size=4, response_tokens=lengths, prompt_tokens=prompts)
    assert free.rollout_s.size == 3 and free.requests_per_server.sum(axis=1).tolist() == [32, 32, 16]
    assert (free.requests_per_server.max(axis=1) - free.requests_per_server.min(axis=1)).max() <= 1
    # The plug-in keeps each group on its planned instance: a group's eight samples on one server.
    planned = replay_submit_all(preset, instances=4, train_batch_size=4, response_tokens=lengths,
                                prompt_tokens=prompts, routing="planned", row_instance=np.zeros(10, dtype=int))
    assert planned.requests_per_server[:, 0].tolist() == [32, 32, 16]
    assert planned.rollout_s.sum() > free.rollout_s.sum()  # one server does everything
    again = replay_submit_all(preset, instances=4, train_batch_size=4, response_tokens=lengths, prompt_tokens=prompts)
    assert again.end_to_end_s == free.end_to_end_s  # seeded ties: deterministic
    # A schedule's own steps: two epochs of five rows, each ending in a short step.
    own = replay_submit_all(preset, instances=4, train_batch_size=4, response_tokens=lengths, prompt_tokens=prompts,
                            row_step=np.array([0, 0, 0, 0, 1, 2, 2, 2, 2, 3]))
    assert own.requests_per_server.sum(axis=1).tolist() == [32, 8, 32, 8]
    with pytest.raises(SettingsError, match="non-decreasing"):
        replay_submit_all(preset, instances=4, train_batch_size=4, response_tokens=lengths, prompt_tokens=prompts,
                          row_step=np.array([1, 0, 0, 0, 1, 2, 2, 2, 2, 3]))


def test_bad_settings_are_refused():
    preset = load_preset()
    one = dict(instances=1, train_batch_size=1, response_tokens=np.array([[5]]), prompt_tokens=np.array([5]))
    with pytest.raises(SettingsError, match="serving must be one of"):
        replay_submit_all(preset, **one, serving="lifo")
    with pytest.raises(SettingsError, match="chunking must be one of"):
        replay_submit_all(preset, **one, chunking="v2")
    with pytest.raises(SettingsError, match="at least one instance"):
        replay_submit_all(preset, **{**one, "instances": 0})
    with pytest.raises(SettingsError, match="at least one row"):
        replay_submit_all(preset, **{**one, "response_tokens": np.zeros((0, 2))})


def test_a_frame_is_read_in_train_step_order_and_routed_by_its_dispatch():
    import polars as pl

    from asp_cli.sim.submit_all import replay_frame

    preset = load_preset()
    lengths = np.random.default_rng(5).integers(50, 1500, size=(6, 4))
    # seq order puts a step-1 row between step-0 rows: verl reads an export by train_step.
    frame = pl.DataFrame({"seq": range(6), "train_step": [0, 1, 0, 1, 1, 0], "instance": [0, 1, 0, 1, 0, 1],
                          "prompt_tokens": [60, 70, 80, 90, 100, 110]})
    order = [0, 2, 5, 1, 3, 4]
    common = dict(instances=2, train_batch_size=3, seed=4)
    for dispatch, routing in (("free", "least-pending"), ("planned", "planned")):
        got = replay_frame(frame, lengths, preset, dispatch=dispatch, **common)
        want = replay_submit_all(preset, response_tokens=lengths[order],
                                 prompt_tokens=np.array([60, 80, 110, 70, 90, 100]), routing=routing,
                                 row_instance=np.array([0, 0, 1, 1, 1, 0]),
                                 row_step=np.array([0, 0, 0, 1, 1, 1]), **common)
        assert got.end_to_end_s == want.end_to_end_s
    aware = replay_frame(frame, lengths, preset, routing="length-aware", predicted_tokens=np.arange(6) * 100.0,
                         **common)
    assert aware.requests_per_server.sum() == 24


def test_cache_aware_keeps_a_group_on_the_server_its_first_sample_went_to():
    """sglang-router's cache_aware policy (slime's default): a group's samples share their prompt, so each follows
    the first, which goes to the least-loaded server; slime submits a rollout's groups in order from one loop."""
    order = acquisition_order(6, 4, 1)
    assert order.tolist() == list(range(24))
    server = route(order, routing="cache-aware", instances=3, rng=np.random.default_rng(0), samples_per_prompt=4)
    groups = server.reshape(6, 4)
    assert (groups == groups[:, :1]).all()  # whole groups
    assert sorted(np.bincount(groups[:, 0], minlength=3).tolist()) == [2, 2, 2]  # dealt by load, two each
    assert sorted(groups[:3, 0].tolist()) == [0, 1, 2]  # each round of three on three servers


def test_cache_aware_keeps_a_prompts_server_over_the_run_and_leaves_it_only_when_far_out_of_balance():
    """sglang-router's tree is never cleared: a prompt of a later epoch goes back to the server that cached it; a
    new prompt to the server whose tree holds the least text; the least-loaded whenever the loads part by more than
    slime's thresholds (10 requests and 1.2 times)."""
    from asp_cli.sim.submit_all import CACHE_AWARE_BALANCE_ABS, CacheAwareRouter

    router = CacheAwareRouter(3, np.random.default_rng(0))
    assert router.pick([0, 0, 0], 7, 500.0) in (0, 1, 2)
    home = router.home[7]
    assert router.pick([CACHE_AWARE_BALANCE_ABS if k == home else 0 for k in range(3)], 7, 500.0) == home  # within
    beyond = [CACHE_AWARE_BALANCE_ABS + 1 if k == home else 0 for k in range(3)]
    assert router.pick(beyond, 7, 500.0) != home  # beyond both thresholds: the least loaded
    assert router.home[7] == home  # and the prompt's server stays the one that cached it first
    # A new prompt: the server whose tree holds the least text, whatever the loads (within the thresholds).
    other = router.pick([0, 0, 0], 8, 100.0)
    assert other != home and router.pick([5, 5, 5], 9, 100.0) not in (home, other)
    # Groups larger than the threshold spill over: 40 samples of one prompt on 2 servers.
    spilled = route(acquisition_order(1, 40, 1), routing="cache-aware", instances=2, rng=np.random.default_rng(0),
                    samples_per_prompt=40)
    assert np.bincount(spilled, minlength=2).min() > 0


def test_a_prompt_returns_to_its_server_in_the_next_epoch_as_slime_routes():
    """Two epochs of the same prompts in another order: the second deals each group to the server it went to in
    the first (sglang-router's tree remembers it), loads allowing, not in rounds of the new order."""
    from asp_cli.sim.submit_all import CacheAwareRouter

    router = CacheAwareRouter(4, np.random.default_rng(0))
    first_epoch = np.arange(8)
    first = route(acquisition_order(8, 2, 1), routing="cache-aware", instances=4, rng=router.rng, samples_per_prompt=2,
                  router=router, prompts=np.repeat(first_epoch, 2)).reshape(8, 2)[:, 0]
    assert np.bincount(first, minlength=4).tolist() == [2, 2, 2, 2]  # dealt in rounds of the order
    second_epoch = np.array([7, 3, 5, 1, 6, 2, 4, 0])
    second = route(acquisition_order(8, 2, 1), routing="cache-aware", instances=4, rng=router.rng,
                   samples_per_prompt=2, router=router, prompts=np.repeat(second_epoch, 2)).reshape(8, 2)[:, 0]
    assert second.tolist() == first[second_epoch].tolist()  # each back to its server


def _steps_with_a_long_group_in_eight(rows: int):
    """A frame of ``rows`` groups of 4 in train batches of 32, every eighth group long, and its lengths."""
    import polars as pl

    frame = pl.DataFrame({"seq": np.arange(rows), "train_step": np.arange(rows) // 32,
                          "instance": np.arange(rows) % 4, "prompt_tokens": np.full(rows, 100)})
    return frame, np.tile(np.where(np.arange(rows) % 8 == 0, 4000, 200)[:, None], (1, 4))


def test_replaying_a_frame_as_slime_routes_keeps_groups_whole_and_differs_from_verls_spread():
    from asp_cli.sim.submit_all import replay_frame

    preset = load_preset("h100-qwen2.5-7b")
    rows = 64
    frame, lengths = _steps_with_a_long_group_in_eight(rows)
    slime = replay_frame(frame, lengths, preset, instances=4, train_batch_size=32, routing="cache-aware")
    verl = replay_frame(frame, lengths, preset, instances=4, train_batch_size=32)
    assert slime.requests_per_server.sum() == verl.requests_per_server.sum() == rows * 4
    assert (slime.requests_per_server % 4 == 0).all()  # whole groups of 4
    # Every eighth group is long: dealt whole, its four samples share one server, which then finishes last; verl's
    # balancer spreads them over the four.
    assert slime.end_to_end_s > verl.end_to_end_s


def test_one_step_off_overlaps_each_rollout_with_the_training_of_the_step_before():
    """slime's train_async.py: rollout 0 alone, then each step the longer of its training and the next rollout,
    each followed by the weight sync; the last step's training alone at the end."""
    from asp_cli.sim.submit_all import one_step_off_end_to_end_s

    rollout, sync = np.array([10.0, 4.0, 9.0]), 1.0
    train = np.array([6.0, 6.0, 6.0]) + sync  # as SubmitAllResult.train_s: the sync included
    # 10 (rollout 0) + max(6, 4) + 1 + max(6, 9) + 1 + 6 + 1
    assert one_step_off_end_to_end_s(rollout, train, sync) == pytest.approx(10 + 7 + 10 + 7)
    assert one_step_off_end_to_end_s(rollout[:1], train[:1], sync) == pytest.approx(10 + 7)
    assert one_step_off_end_to_end_s(np.array([]), np.array([]), sync) == 0.0


def test_a_replay_one_step_off_hides_the_rollout_behind_training_but_never_below_either():
    from asp_cli.sim.submit_all import replay_frame

    preset = load_preset("h100-qwen2.5-7b")
    frame, lengths = _steps_with_a_long_group_in_eight(96)
    synchronous = replay_frame(frame, lengths, preset, instances=4, train_batch_size=32, routing="cache-aware")
    overlapped = replay_frame(frame, lengths, preset, instances=4, train_batch_size=32, routing="cache-aware",
                              one_step_off=True)
    # The same rollouts (each starts on empty servers), only the time between them differs.
    assert np.array_equal(synchronous.rollout_s, overlapped.rollout_s)
    assert overlapped.end_to_end_s < synchronous.end_to_end_s
    assert overlapped.end_to_end_s >= max(overlapped.rollout_s.sum(), overlapped.train_s.sum())


def test_round_robin_deals_each_request_to_the_next_server_in_turn():
    """AReaL's default routing: every sample its own request id, to the next server whatever its load."""
    order = acquisition_order(3, 4, 1)
    server = route(order, routing="round-robin", instances=3, rng=np.random.default_rng(0), samples_per_prompt=4)
    assert server.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]


def test_group_round_robin_deals_each_prompt_whole_to_the_engines_in_turn():
    """OpenRLHF 0.11.2's dispatch (`_dispatch_prompts_to_vllm`): one snapshot of unfinished requests, then each prompt
    with its n samples to the least loaded engine counting what the batch gave it; every batch starts on idle
    engines, so the j-th prompt goes to engine j mod k (not each sample in turn, as AReaL deals)."""
    order = acquisition_order(5, 2, 1)
    server = route(order, routing="group-round-robin", instances=3, rng=np.random.default_rng(0), samples_per_prompt=2)
    assert server.tolist() == [0, 0, 1, 1, 2, 2, 0, 0, 1, 1]
    preset = load_preset("h100-qwen2.5-7b")
    lengths = np.array([[900, 900], [10, 10], [10, 10], [900, 900]])
    # Dealt in turn, the two long prompts share engine 0 of 3 (positions 0 and 3): the step waits for them both.
    dealt = replay_submit_all(preset, instances=3, train_batch_size=4, response_tokens=lengths,
                              prompt_tokens=np.full(4, 50), routing="group-round-robin")
    assert dealt.requests_per_server[0].tolist() == [4, 2, 2]
    apart = replay_submit_all(preset, instances=3, train_batch_size=4, response_tokens=lengths[[0, 1, 3, 2]],
                              prompt_tokens=np.full(4, 50), routing="group-round-robin")
    assert apart.rollout_s[0] < dealt.rollout_s[0]  # the order in the batch places the work: asp's plan is its layout
