"""asp_cli.integrate.verl_router: each request to its planned instance, the rest least in flight (no verl here;
tests/integration/test_verl.py runs it as verl 0.9.1 loads and calls it)."""

from __future__ import annotations

import pytest

from asp_cli.integrate.verl_router import (
    INSTANCE_SLOTS, PRIORITY_BASE, ScheduleRouter, decode_instance, encode_priority,
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
    assert router.require_acquire_fields() == ["priority"] and router.require_release_fields() == []
    got = [router.acquire_server(f"r{i}", priority=encode_priority(i, 1)) for i in range(5)]
    assert got == [("10.0.0.2:8000", "h1")] * 5  # least-pending would have spread them
    assert router.get_status()["servers"] == {"10.0.0.1:8000": 0, "10.0.0.2:8000": 5, "10.0.0.3:8000": 0}
    router.release_server("10.0.0.2:8000", request_id="r0")
    assert router.get_inflight_count("10.0.0.2:8000") == 4 and router.get_total_inflight() == 4
    assert router.get_status()["routed"] == {"planned": 5, "unplanned": 0, "sticky": 0}


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
    assert router.get_status()["routed"] == {"planned": 3, "unplanned": 2, "sticky": 1}
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
