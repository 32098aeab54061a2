"""A router for verl 0.9's rollout servers that sends each group to the instance asp planned for it (`asp schedule
--dispatch planned` on verl), or each request to the server with the fewest predicted tokens in flight
(``actor_rollout_ref.rollout.router_config_path``).

verl 0.9.1 sends every generate() call through one load-balancer actor (verl/workers/rollout/router.py): by default
the server with the fewest requests in flight (least-pending), each multi-turn session kept on its server. A YAML
file named by ``actor_rollout_ref.rollout.router_config_path`` replaces it with a class of the user's: verl reads
``router_class`` (a dotted name) from the file and constructs it as ``cls(servers, yaml_config)``, ``servers``
mapping each server's address to its actor handle in replica order::

    # asp-router.yaml
    router_class: asp_cli.integrate.verl_router.ScheduleRouter

    actor_rollout_ref.rollout.router_config_path=/abs/path/asp-router.yaml
    +data.asp_route=planned          # ScheduleDataset: each training row carries its planned instance

Whether keeping to the plan pays on verl: it did not in asp's replays of verl's own routing. verl's balancer picks a
server for every sample as it is submitted, so each group's samples are spread over the servers by count; one
server per group balanced worse where rollout binds: the planned route was 1.9-4.1% slower than verl's default
with its synchronous trainer (docs/benchmarks.md, "As verl routes") and 2.5-4.0% slower with its asynchronous
ones at a lag bound of 2 with a trainer that keeps up and as many prompts in flight as the servers hold; with
verl's default rollouter limit of 16 prompts per server it was 1.0-4.0% faster, and with a trainer that
binds and no lag bound 1.5-6.6% faster ("As verl routes an asynchronous trainer"). asp's simulator, which routes a whole group to
whichever server frees first, had found it level with the best router on long reasoning, rollout-bound; that was
its routing, not verl's. No GPU run has measured either.

The planned instance reaches the router through the request's ``priority``, the one per-sample field verl's agent
loops pass on to the balancer (``require_acquire_fields``): `ScheduleDataset` with ``+data.asp_route=planned`` sets
every training row's ``priority`` to ``PRIORITY_BASE + position * INSTANCE_SLOTS + instance`` (`encode_priority`),
its position in the dataset's order first, so that vLLM's priority scheduling, where a user turns it on, still
serves rows in the schedule's order (verl's own default is the row's index in its batch). Instance ``k`` is the
``k``-th server (modulo their number: plan with ``--instances`` equal to the rollout replicas). A request without
such a priority (validation rows, another dataset) goes to the server with the fewest requests in flight, as
verl's own balancer sends it. Requests with the same ``request_id`` (the turns of one session) stay on one server.

With ``+data.asp_route=length`` the ``priority`` carries each row's predicted response tokens per sample instead
(`encode_length_priority`, from ``LENGTH_BASE`` up, still ordered by position), and the router sends each request
to the server with the fewest predicted tokens in flight. verl's synchronous trainer submits a whole train batch at
once, every sample its own request, before any finishes, so verl's own balancer deals a step's requests out evenly
by count, whatever their lengths. In asp's replay of that (docs/benchmarks.md, "As verl routes") routing by
predicted tokens made asp's representative plan 1.5-4.1% faster on the mixes with verl's legacy trainer, whose
workers interleave single samples, and level with its v1 trainer, which starts each prompt's samples together and
so already spreads every group evenly over the servers.

This module imports neither verl nor Ray: verl wraps the class in ``ray.remote`` itself.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

_log = logging.getLogger("asp_cli.integrate.verl_router")

# A priority at or above PRIORITY_BASE carries asp's plan; verl's default priorities (a batch's row indices) are
# far below it. From LENGTH_BASE up it carries a predicted length instead of an instance.
PRIORITY_BASE = 1 << 40
LENGTH_BASE = 1 << 52  # every priority below 2^53 survives a cast to float64 unchanged
INSTANCE_SLOTS = 1 << 16  # instances a priority can name (the rest of it is the row's position)
MAX_POSITION = (LENGTH_BASE - PRIORITY_BASE) // INSTANCE_SLOTS - 1  # rows a priority can order
MAX_CARRIED_TOKENS = INSTANCE_SLOTS - 1  # a longer prediction is carried as this many tokens
STICKY_SESSIONS = 10_000  # request ids remembered for multi-turn stickiness (verl's DEFAULT_ROUTING_CACHE_SIZE)
# What a dataset row may carry for the router: nothing, its planned instance (`encode_priority`), or its
# predicted response tokens per sample (`encode_length_priority`: each request to the server with the fewest
# predicted tokens in flight).
ROUTES = ("none", "planned", "length")


def encode_priority(position: int, instance: int) -> int:
    """The ``priority`` that carries a row's planned ``instance``, ordered by its ``position`` in the dataset."""
    if not 0 <= instance < INSTANCE_SLOTS:
        raise ValueError(f"instance {instance} is outside 0..{INSTANCE_SLOTS - 1}")
    if not 0 <= position <= MAX_POSITION:
        raise ValueError(f"position {position} is negative or past {MAX_POSITION:,}")
    return PRIORITY_BASE + position * INSTANCE_SLOTS + instance


def encode_length_priority(position: int, tokens: int) -> int:
    """The ``priority`` that carries a row's predicted response ``tokens`` per sample (at most
    `MAX_CARRIED_TOKENS`), ordered by its ``position`` in the dataset."""
    if tokens < 0 or not 0 <= position <= MAX_POSITION:
        raise ValueError(f"tokens {tokens} or position {position} is negative, or the position past {MAX_POSITION:,}")
    return LENGTH_BASE + position * INSTANCE_SLOTS + min(int(tokens), MAX_CARRIED_TOKENS)


def priority_column(values: list[int], route: str = "planned") -> list[int]:
    """The ``priority`` of each row of a file or dataset, in row order: ``values`` are the rows' planned instances
    (``route`` planned) or their predicted tokens per sample (``route`` length)."""
    encode = encode_length_priority if route == "length" else encode_priority
    return [encode(position, int(value)) for position, value in enumerate(values)]


# verl 0.9.1's agent loops that pass a sample's `priority` on to its requests (single_turn_agent_loop.py:79); its tool
# agent loop takes it and sends none (tool_agent_loop.py:244-254), so asp's router sees those requests unplanned.
PRIORITY_AGENT_LOOPS = ("single_turn_agent",)


def unrouted_agents_note(agent_names: list | None, route: str, setting: str | None = None) -> str | None:
    """What ``route`` (given as ``setting``, by default ``--route ROUTE``) does for rows whose ``agent_name`` (the
    dataset's column; None: verl's default, the single-turn loop) is an agent loop that does not pass `priority`
    on: nothing (an agent newcomer's tool_agent rows)."""
    if route == "none" or not agent_names:
        return None
    others: dict[str, int] = {}
    for name in agent_names:
        if name is not None and str(name) not in PRIORITY_AGENT_LOOPS:
            others[str(name)] = others.get(str(name), 0) + 1
    if not others:
        return None
    named = ", ".join(f"{name} {count:,}" for name, count in sorted(others.items(), key=lambda kv: -kv[1])[:3])
    return (f"{setting or f'--route {route}'}: {sum(others.values()):,} of the {len(agent_names):,} rows name an agent loop other than "
            f"verl's single-turn one, the only one of verl 0.9.1's that passes the row's priority on to its requests "
            f"({named}; its tool agent loop drops it, tool_agent_loop.py:244-254): asp's router places those "
            "requests as verl's balancer would, unless your own loop passes priority on")


def other_router_note(settings: Any) -> str | None:
    """For a verl export: what a schedule timed for another router than verl's balancer (`--router`) means there."""
    router = getattr(settings, "router", None)
    if router in (None, "least-pending"):
        return None
    from asp_cli.settings import router_owner

    owner = router_owner(router, getattr(settings, "trainer", "schedule"))
    return (f"the schedule was timed for {'sglang-router' if owner == 'sglang' else owner}'s routing "
            f"(--router {router}), but verl sends every sample through its own balancer, which spreads each group "
            "over the servers: make the schedule without --router for verl")


def route_priorities(frame: Any, route: str) -> list[int]:
    """The ``priority`` column for a schedule's rows (a Polars frame in the file's row order) under ``route``:
    planned instances, or predicted tokens per sample (``predicted_mean_tokens``, else ``predicted_tokens``)."""
    if route == "length":
        column = "predicted_mean_tokens" if "predicted_mean_tokens" in frame.columns else "predicted_tokens"
        values = [0 if v is None else int(v) for v in frame[column].to_list()]
        return priority_column(values, "length")
    return priority_column(frame["instance"].to_list())


def _carried(priority: Any) -> int | None:
    try:
        value = int(priority)
    except (TypeError, ValueError):
        return None
    return value if value >= PRIORITY_BASE else None


def decode_instance(priority: Any) -> int | None:
    """The planned instance a ``priority`` carries, or None where it carries none."""
    value = _carried(priority)
    return None if value is None or value >= LENGTH_BASE else (value - PRIORITY_BASE) % INSTANCE_SLOTS


def decode_tokens(priority: Any) -> int | None:
    """The predicted tokens per sample a ``priority`` carries, or None where it carries none."""
    value = _carried(priority)
    return None if value is None or value < LENGTH_BASE else (value - LENGTH_BASE) % INSTANCE_SLOTS


class ScheduleRouter:
    """verl 0.9's ``RequestLoadBalancer`` protocol, routing each request to its planned instance.

    Parameters
    ----------
    servers
        Server id (address) to actor handle, in replica order (as verl passes them).
    config
        The router YAML's contents (``router_class`` and nothing else is required).

    A request whose ``priority`` carries a predicted length instead (``+data.asp_route=length``) goes to the server
    with the fewest predicted tokens in flight (ties: the fewest requests, then replica order), counted until
    verl releases it. verl submits a whole train batch at once, before any request finishes, so this deals each
    step's predicted work out evenly, where verl's own balancer deals out counts.

    ``get_status()`` says how many requests went to their planned instance (``planned``), by predicted length
    (``length``), to the least-loaded server for want of either (``unplanned``), or followed their session
    (``sticky``); ``predicted_tokens`` is each server's predicted tokens in flight.
    """

    def __init__(self, servers: dict[str, Any], config: dict[str, Any] | None = None):
        self._servers: dict[str, Any] = dict(servers)
        self._inflight: dict[str, int] = {sid: 0 for sid in self._servers}
        self._sessions: OrderedDict[str, str] = OrderedDict()
        self._config = dict(config or {})
        self._tokens: dict[str, int] = {sid: 0 for sid in self._servers}
        self._carrying: dict[str, list[tuple[str, int]]] = {}  # request id -> (server, tokens) per acquire
        self._routed = {"planned": 0, "length": 0, "unplanned": 0, "sticky": 0}
        self._warned_fold = False
        self._warned_release = False

    # -- routing ---------------------------------------------------------------------------------------------------

    def acquire_server(self, request_id: str, priority: Any = None, **extra: Any) -> tuple[str, Any]:
        """The server for one generate() call, counted in flight until `release_server`."""
        if not self._inflight:
            raise RuntimeError("asp ScheduleRouter: no servers registered")
        server_id = self._sessions.get(request_id)
        tokens = decode_tokens(priority)
        if server_id in self._inflight:
            self._sessions.move_to_end(request_id)
            self._routed["sticky"] += 1
        else:
            instance = decode_instance(priority)
            order = list(self._inflight)
            if instance is not None:
                if instance >= len(order) and not self._warned_fold:
                    _log.warning("asp: the schedule plans instance %d but verl has %d rollout servers; instances are "
                                 "folded onto servers modulo their number (plan with --instances %d)", instance,
                                 len(order), len(order))
                    self._warned_fold = True
                server_id = order[instance % len(order)]
                self._routed["planned"] += 1
            elif tokens is not None:
                rank = {sid: i for i, sid in enumerate(order)}
                server_id = min(order, key=lambda sid: (self._tokens[sid], self._inflight[sid], rank[sid]))
                self._routed["length"] += 1
            else:  # least in flight, the first such server in replica order
                server_id = min(order, key=self._inflight.__getitem__)
                self._routed["unplanned"] += 1
            self._sessions[request_id] = server_id
            if len(self._sessions) > STICKY_SESSIONS:
                self._sessions.popitem(last=False)
        self._inflight[server_id] += 1
        if tokens is not None:
            self._tokens[server_id] += tokens
            self._carrying.setdefault(request_id, []).append((server_id, tokens))
        return server_id, self._servers[server_id]

    def release_server(self, server_id: str, request_id: str | None = None) -> None:
        """One request on ``server_id`` finished (its predicted tokens, if it carried some, leave with it)."""
        if self._inflight.get(server_id, 0) > 0:
            self._inflight[server_id] -= 1
        if request_id is None and self._carrying and not self._warned_release:
            _log.warning("asp: verl released a request without its request_id, so the predicted tokens of "
                         "+data.asp_route=length cannot leave their server's count; this verl does not pass the "
                         "fields the router declares (require_release_fields)")
            self._warned_release = True
        held = self._carrying.get(request_id) if request_id is not None else None
        if held:
            for i, (sid, tokens) in enumerate(held):
                if sid == server_id:
                    del held[i]
                    if sid in self._tokens:
                        self._tokens[sid] = max(0, self._tokens[sid] - tokens)
                    break
            if not held:
                del self._carrying[request_id]

    def require_acquire_fields(self) -> list[str]:
        """The generate() keyword verl must pass to `acquire_server`: the one that carries the plan."""
        return ["priority"]

    def require_release_fields(self) -> list[str]:
        """The request id, so a released request's predicted tokens leave its server's count."""
        return ["request_id"]

    # -- the pool --------------------------------------------------------------------------------------------------

    def add_servers(self, servers: dict[str, Any]) -> None:
        """Register servers (appended to the replica order)."""
        for sid, handle in servers.items():
            self._servers[sid] = handle
            self._inflight.setdefault(sid, 0)
            self._tokens.setdefault(sid, 0)

    def remove_servers(self, server_ids: list[str]) -> None:
        """Unregister servers; their sessions re-route on their next turn, and their requests' predicted tokens
        are forgotten (a late release must not debit a server re-added under the same address)."""
        gone = set(server_ids)
        for sid in gone:
            self._servers.pop(sid, None)
            self._inflight.pop(sid, None)
            self._tokens.pop(sid, None)
        for request_id in list(self._carrying):
            kept = [(sid, tokens) for sid, tokens in self._carrying[request_id] if sid not in gone]
            if kept:
                self._carrying[request_id] = kept
            else:
                del self._carrying[request_id]

    def get_all_servers(self) -> list[str]:
        return list(self._inflight)

    def get_inflight_count(self, server_id: str) -> int:
        return self._inflight.get(server_id, 0)

    def get_total_inflight(self) -> int:
        return sum(self._inflight.values())

    def clear_sticky_cache(self) -> dict:
        """Forget every session (verl calls it when rollout and training switch)."""
        cleared = len(self._sessions)
        self._sessions.clear()
        return {"cleared_entries": cleared, "server_loads": dict(self._inflight)}

    def get_status(self) -> dict:
        return {"servers": dict(self._inflight), "total_inflight": self.get_total_inflight(),
                "active_servers": len(self._inflight), "registered_handles": list(self._servers),
                "routed": dict(self._routed), "predicted_tokens": dict(self._tokens)}
