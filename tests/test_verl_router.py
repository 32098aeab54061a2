"""asp_cli.integrate.verl_router: each request to its planned instance, the rest least in flight (no verl here;
tests/integration/test_verl.py runs it as verl 0.9.1 loads and calls it)."""

from __future__ import annotations

import pytest

from asp_cli.integrate.verl_router import (
    INSTANCE_SLOTS, LENGTH_BASE, MAX_CARRIED_TOKENS, MAX_POSITION, PRIORITY_BASE, ScheduleRouter, decode_instance, decode_tokens,
    encode_length_priority, encode_priority, priority_column,
)

SERVERS = {"10.0.0.1:8000": "h0", "10.0.0.2:8000": "h1", "10.0.0.3:8000": "h2"}


def test_a_priority_carries_the_instance_and_keeps_the_rows_order():
    priorities = [encode_priority(position, instance) for position, instance in [(0, 2), (1, 0), (2, 1), (3, 2)]]
    assert priorities == sorted(priorities)  # vLLM's priority scheduling serves rows in the dataset's order
    assert [decode_instance(p) for p in priorities] == [2, 0, 1, 2]
    assert decode_instance(encode_priority(10**9, INSTANCE_SLOTS - 1)) == INSTANCE_SLOTS - 1
    # verl's own priorities (a batch's row indices), none, or junk carry no plan.
    for value in (0, 5, 4095, PRIORITY_BASE - 1, None, "x"):
        assert decode_instance(value) is None
    with pytest.raises(ValueError, match="instance 65536"):
        encode_priority(0, INSTANCE_SLOTS)
    with pytest.raises(ValueError, match="negative"):
        encode_priority(-1, 0)


def test_planned_requests_go_to_their_instance_whatever_the_load():
    router = ScheduleRouter(SERVERS, {"router_class": "asp_cli.integrate.verl_router.ScheduleRouter"})
    assert router.require_acquire_fields() == ["priority"] and router.require_release_fields() == ["request_id"]
    got = [router.acquire_server(f"r{i}", priority=encode_priority(i, 1)) for i in range(5)]
    assert got == [("10.0.0.2:8000", "h1")] * 5  # least-pending would have spread them
    assert router.get_status()["servers"] == {"10.0.0.1:8000": 0, "10.0.0.2:8000": 5, "10.0.0.3:8000": 0}
    router.release_server("10.0.0.2:8000", request_id="r0")
    assert router.get_inflight_count("10.0.0.2:8000") == 4 and router.get_total_inflight() == 4
    assert router.get_status()["routed"] == {"planned": 5, "length": 0, "unplanned": 0, "sticky": 0}


def test_requests_without_a_plan_go_least_in_flight_and_sessions_stay_put():
    router = ScheduleRouter(SERVERS)
    router.acquire_server("a", priority=encode_priority(0, 0))
    router.acquire_server("b", priority=encode_priority(1, 0))
    router.acquire_server("c", priority=encode_priority(2, 1))
    # Validation rows (verl's own priorities) fill the emptiest server first.
    assert router.acquire_server("v0", priority=3)[0] == "10.0.0.3:8000"
    assert router.acquire_server("v1")[0] == "10.0.0.2:8000"  # 1, 1 in flight: the first in replica order
    # A second turn of session "c" (multi-turn agent loops reuse the request id) stays on its server.
    assert router.acquire_server("c", priority=encode_priority(9, 2))[0] == "10.0.0.2:8000"
    assert router.get_status()["routed"] == {"planned": 3, "length": 0, "unplanned": 2, "sticky": 1}
    assert router.clear_sticky_cache()["cleared_entries"] == 5
    assert router.acquire_server("c", priority=encode_priority(9, 2))[0] == "10.0.0.3:8000"


def test_more_instances_than_servers_fold_onto_them_with_a_warning(caplog):
    router = ScheduleRouter(SERVERS)
    with caplog.at_level("WARNING", logger="asp_cli.integrate.verl_router"):
        assert router.acquire_server("r", priority=encode_priority(0, 4))[0] == "10.0.0.2:8000"  # 4 mod 3
        router.acquire_server("s", priority=encode_priority(1, 5))
    assert len(caplog.records) == 1 and "plan with --instances 3" in caplog.text


def test_the_pool_changes_as_verl_scales_it():
    router = ScheduleRouter({})
    with pytest.raises(RuntimeError, match="no servers"):
        router.acquire_server("r", priority=encode_priority(0, 0))
    router.add_servers(SERVERS)
    assert router.get_all_servers() == list(SERVERS)
    router.acquire_server("r", priority=encode_priority(0, 2))
    router.remove_servers(["10.0.0.3:8000"])
    assert router.get_all_servers() == ["10.0.0.1:8000", "10.0.0.2:8000"]
    # The removed server's session re-routes: instance 2 of 2 servers is the first.
    assert router.acquire_server("r", priority=encode_priority(0, 2))[0] == "10.0.0.1:8000"
    router.release_server("10.0.0.3:8000")  # a late release from a removed server is ignored
    assert router.get_status()["active_servers"] == 2


def test_a_priority_can_carry_a_predicted_length_instead():
    priorities = priority_column([900, 20, 70_000, 0], "length")
    assert priorities == sorted(priorities) and all(p >= LENGTH_BASE for p in priorities)
    assert [decode_tokens(p) for p in priorities] == [900, 20, MAX_CARRIED_TOKENS, 0]  # capped at 65,535
    assert [decode_instance(p) for p in priorities] == [None] * 4
    assert decode_tokens(encode_priority(3, 2)) is None and decode_tokens(7) is None and decode_tokens(None) is None
    assert max(priorities) < 2**53 and all(int(float(p)) == p for p in priorities)  # exact as float64 too
    assert decode_tokens(encode_length_priority(MAX_POSITION, 5)) == 5
    with pytest.raises(ValueError, match="past"):
        encode_length_priority(MAX_POSITION + 1, 5)
    with pytest.raises(ValueError, match="past"):
        encode_priority(MAX_POSITION + 1, 0)
    with pytest.raises(ValueError, match="negative"):
        encode_length_priority(0, -1)


def test_length_requests_go_where_the_fewest_predicted_tokens_are_in_flight():
    router = ScheduleRouter(SERVERS)
    # A train batch submitted at once: verl's balancer would deal these out by count (two, two and one).
    got = [router.acquire_server(f"r{i}", priority=encode_length_priority(i, tokens))[0]
           for i, tokens in enumerate([1000, 900, 800, 200, 100])]
    assert got == ["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.3:8000", "10.0.0.2:8000"]
    assert router.get_status()["predicted_tokens"] == {"10.0.0.1:8000": 1000, "10.0.0.2:8000": 1000,
                                                       "10.0.0.3:8000": 1000}
    assert router.get_status()["routed"] == {"planned": 0, "length": 5, "unplanned": 0, "sticky": 0}
    # Released requests take their tokens with them; an unknown request id or server changes no count.
    router.release_server("10.0.0.1:8000", request_id="r0")
    router.release_server("10.0.0.1:8000", request_id="nobody")
    assert router.get_status()["predicted_tokens"]["10.0.0.1:8000"] == 0
    assert router.acquire_server("r5", priority=encode_length_priority(5, 50))[0] == "10.0.0.1:8000"
    # A server removed and re-added under its address starts from zero; its old requests' releases debit nothing.
    router.remove_servers(["10.0.0.2:8000"])
    router.add_servers({"10.0.0.2:8000": SERVERS["10.0.0.2:8000"]})
    router.acquire_server("r6", priority=encode_length_priority(6, 300))
    router.release_server("10.0.0.2:8000", request_id="r1")
    assert router.get_status()["predicted_tokens"]["10.0.0.2:8000"] == 300
    # Ties in predicted tokens go to the fewest in flight, then replica order.
    fresh = ScheduleRouter(SERVERS)
    fresh.acquire_server("a", priority=encode_length_priority(0, 0))
    assert fresh.acquire_server("b", priority=encode_length_priority(1, 0))[0] == "10.0.0.2:8000"


def test_a_release_without_its_request_id_is_said_once(caplog):
    router = ScheduleRouter(SERVERS)
    router.acquire_server("a", priority=encode_length_priority(0, 300))
    router.acquire_server("b", priority=encode_length_priority(1, 300))
    with caplog.at_level("WARNING", logger="asp_cli.integrate.verl_router"):
        router.release_server("10.0.0.1:8000")
        router.release_server("10.0.0.2:8000")
    assert len(caplog.records) == 1 and "without its request_id" in caplog.text
    assert router.get_total_inflight() == 0  # the counts of requests still go down


def test_a_schedule_timed_for_another_router_names_whose_routing():
    """For a verl export: a schedule made for slime's, OpenRLHF's or AReaL's routing says whose (OpenRLHF's deal was
    called AReaL's)."""
    from asp_cli.integrate.verl_router import other_router_note
    from asp_cli.settings import ScheduleSettings

    def note(**kw):
        return other_router_note(ScheduleSettings(engine="streaming", **kw))

    assert note() is None and note(router="least-pending") is None
    assert "timed for sglang-router's routing (--router cache-aware)" in note(router="cache-aware")
    assert "timed for AReaL's routing (--router round-robin)" in note(router="round-robin")
    assert "timed for OpenRLHF's routing" in note(router="group-round-robin", max_lag=0, trainer="schedule")
    assert "timed for AReaL's routing" in note(router="group-round-robin", max_lag=1, trainer="arrival")
