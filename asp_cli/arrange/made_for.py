"""Whose deal (router and trainer) a plan on servers was made for: the schedule summary's ``made_for`` and the
"made for ..." line `asp schedule` and `asp report` print from it. A plan's router or trainer is often one
framework's while another framework shares the rest (`--router group-round-robin` is OpenRLHF's deal with
`--trainer schedule` and AReaL's controller with `--trainer arrival`), so a newcomer who left out one option was
given another framework's plan in silence: the line names whose it is and what makes it the others'."""

from __future__ import annotations

from typing import Any

from asp_cli.settings import ScheduleSettings, one_step_off


def _deal(framework: str, trainer: str | None, *options: str) -> dict[str, Any]:
    return {"framework": framework, "trainer": trainer, "options": list(options)}


def _other(framework: str, trainer: str | None, *options: str, without: tuple[str, ...] = ()) -> dict[str, Any]:
    """An alternative deal: `_deal` and ``without``, the plan's options to leave out, which no value replaces
    (``--verl-trainer``, refused beside another framework's router: `--json` could not say it, only the line)."""
    return {**_deal(framework, trainer, *options), "without": list(without)}


def made_for(settings: ScheduleSettings) -> dict[str, Any] | None:
    """Whose deal (router and trainer) a plan on servers was made for, where its router or trainer is one
    framework's and another framework shares the rest: ``framework``, ``trainer`` (that framework's own name for
    it; None for a router's plan under a trainer the framework does not run), the ``options`` that make it so, and
    ``alternatives``, each the ``framework``, ``trainer`` and ``options`` (given beside this plan's, or in place of
    its values) and ``without`` (this plan's options to leave out, such as ``--verl-trainer separate-async``
    beside another framework's router) that make the plan for the other framework or trainer. None for a plan that names no such deal
    (verl's balancer under an asynchronous trainer taking groups in arrival order, AReaL's SPMD mode, a blocking
    engine), whose arrangement line says whose routing it was timed with. `asp schedule` says it under its
    summary's first line."""
    lag, trainer, router = settings.max_lag, settings.trainer, settings.router
    if settings.engine != "streaming":
        return None
    if router == "group-round-robin" and trainer == "arrival":
        return {**_deal("AReaL", "single controller", "--router group-round-robin", "--trainer arrival",
                        "--max-lag none" if lag is None else f"--max-lag {lag:g}"),
                "alternatives": [_other("OpenRLHF", "synchronous", "--trainer schedule", "--max-lag 0"),
                                 _other("OpenRLHF", "--train.async_enable", "--trainer schedule", "--max-lag 1")]}
    areal = _other("AReaL", "single controller", "--trainer arrival", "--max-lag N")
    if router == "group-round-robin":  # `--trainer schedule` at a lag of 0 or 1 (`ScheduleSettings` refuses others)
        own, other = ("synchronous", "--train.async_enable") if lag == 0 else ("--train.async_enable", "synchronous")
        return {**_deal("OpenRLHF", own, "--router group-round-robin", "--trainer schedule", f"--max-lag {lag:g}"),
                "alternatives": [_other("OpenRLHF", other, f"--max-lag {1 - lag:g}"), areal]}
    if router == "cache-aware":
        own = ("train.py" if lag == 0 and trainer == "schedule" else
               "train_async.py" if one_step_off(router, lag, trainer) else None)
        return {**_deal("slime", own, "--router cache-aware", *([f"--max-lag {lag:g}", "--trainer schedule"]
                                                                if own else [])),
                "alternatives": [] if own else [_other("slime", "train.py", "--max-lag 0", "--trainer schedule"),
                                                _other("slime", "train_async.py", "--max-lag 1", "--trainer schedule")]}
    if router in (None, "least-pending") and lag == 0 and trainer == "schedule":
        # verl's synchronous trainer; slime's train.py and OpenRLHF's default take the same steps behind their own
        # routers (a slime newcomer who left out --router cache-aware was given verl's routing in silence).
        planned = ["--dispatch planned"] if settings.dispatch == "planned" else []
        free = ["--dispatch free"] if planned else []  # a router places each request itself (`ScheduleSettings`)
        return {**_deal("verl", "synchronous", "--engine streaming", "--max-lag 0", "--trainer schedule", *planned),
                "alternatives": [_other("slime", "train.py", "--router cache-aware", *free),
                                 _other("OpenRLHF", "synchronous", "--router group-round-robin", *free)]}
    if router in (None, "least-pending") and lag is not None and lag > 0 and trainer == "schedule":
        # Each step's own groups a warm-up ahead: verl's v1 trainer with asp's replay buffer, which `asp export
        # --format verl` takes for it (`colocate-async` unless `--verl-trainer` names the mode). At a lag of 1 it
        # is slime's train_async.py and OpenRLHF's --train.async_enable behind their own routers: a newcomer who
        # left out the router was given verl's routing with no word of it (a review's).
        planned = ["--dispatch planned"] if settings.dispatch == "planned" else []
        free = ["--dispatch free"] if planned else []
        mode = settings.verl_v1_mode or "colocate-async"
        # --verl-trainer is refused beside another router (verl's trainers route through its balancer)
        named = (f"--verl-trainer {mode}",) if settings.verl_v1_mode else ()
        return {**_deal("verl", mode.replace("-", "_"), "--engine streaming", f"--max-lag {lag:g}",
                        "--trainer schedule", *named, *planned),
                "alternatives": [] if lag != 1 else [
                    _other("slime", "train_async.py", "--router cache-aware", *free, without=named),
                    _other("OpenRLHF", "--train.async_enable", "--router group-round-robin", *free, without=named)]}
    return None


def made_for_line(made: dict[str, Any] | None) -> str:
    """Whose deal a plan for a framework's router was made for, and the options that make it for the other
    framework that shares the router, said from its summary's ``made_for`` (`made_for`), as `asp schedule` and `asp report` say it:
    `--router group-round-robin` is OpenRLHF's deal with `--trainer schedule` and AReaL's controller with
    `--trainer arrival` (the default), and an OpenRLHF newcomer who left out `--trainer schedule --max-lag 0` was
    given AReaL's plan, exit 0, said only deep in the arrangement line. Synchronous steps on servers (`--max-lag 0
    --trainer schedule`) behind verl's balancer are verl's trainer's, and the line names slime's and OpenRLHF's
    routers for theirs. Empty for other plans (verl's balancer under an asynchronous trainer, AReaL's SPMD mode),
    whose lines already say whose they are."""
    if not made:
        return ""
    framework, trainer, options = made["framework"], made["trainer"], made["options"]
    if framework == "AReaL":
        bound = "no --max-lag: no bound" if options[-1] == "--max-lag none" else options[-1]
        return (f"  made for AReaL's controller (--router group-round-robin --trainer arrival, {bound}): an "
                "asynchronous trainer, each group dealt whole to the next server as the staleness bound admits it; "
                "for OpenRLHF, which trains each rollout batch whole, add --trainer schedule --max-lag 0 "
                "(synchronous, its default) or --max-lag 1 (--train.async_enable)")
    if framework == "OpenRLHF":
        return ("  made for OpenRLHF's "
                + ("synchronous trainer (its default: --router group-round-robin --trainer schedule --max-lag 0), "
                   "each rollout batch dealt to the engines in turn and trained whole, as AReaL's controller runs at "
                   "rollout.max_head_offpolicyness=0; for --train.async_enable give --max-lag 1"
                   if trainer == "synchronous" else
                   "--train.async_enable (--router group-round-robin --trainer schedule --max-lag 1), each rollout "
                   "batch dealt to the engines in turn while the one before trains; for its synchronous default give "
                   "--max-lag 0")
                + "; for AReaL's asynchronous controller, --trainer arrival --max-lag N (its "
                "rollout.max_head_offpolicyness)")
    if framework == "slime":
        run = {"train.py": "train.py's synchronous steps",
               "train_async.py": "train_async.py, each rollout generated while the step before trains"}.get(trainer)
        return ("  made for slime's router (--router cache-aware: sglang-router's cache-aware policy)"
                + (f" and {run}" if run else ", under a trainer slime does not run: its train.py is --max-lag 0 "
                   "--trainer schedule, its train_async.py --max-lag 1 --trainer schedule"))
    if framework == "verl" and trainer != "synchronous":  # verl's v1 trainer with asp's replay buffer
        planned, lag = "--dispatch planned" in options, options[1].removeprefix("--max-lag ")
        named = next((o for o in options if o.startswith("--verl-trainer")), None)
        return (f"  made for verl's v1 trainer ({trainer}) with asp's replay buffer: each step trains the groups "
                f"the schedule gives it, the rollout a warm-up of {lag} train batch{'' if lag == '1' else 'es'} "
                f"ahead (trainer.v1.{trainer}.num_warmup_batches), each sample routed by "
                + ("asp's router plug-in (--dispatch planned)" if planned else "verl's balancer (least-pending)")
                + ("" if named else
                   "; for separate_async add --verl-trainer separate-async")
                + ("; slime's train_async.py and OpenRLHF's --train.async_enable take the same steps a rollout "
                   "ahead behind their own routers: for slime add --router cache-aware, for OpenRLHF --router "
                   "group-round-robin" + _each(made["alternatives"][0])
                   if made["alternatives"] else ""))
    if framework == "verl":
        # The synchronous steps slime's train.py and OpenRLHF's default take too, behind their own routers: a slime
        # newcomer who left out --router cache-aware was given verl's routing in silence (export said it, later).
        planned = "--dispatch planned" in options
        return ("  made for verl's synchronous trainer (main_ppo's default: --engine streaming --max-lag 0 --trainer "
                "schedule), each sample routed by "
                + ("asp's router plug-in (--dispatch planned: each group to its planned server)" if planned else
                   "verl's balancer (least-pending: a group's samples spread over the servers)")
                + "; slime's train.py and OpenRLHF's synchronous trainer take the same steps behind their own "
                "routers: for slime add --router cache-aware (sglang-router keeps a group on one server), for "
                "OpenRLHF --router group-round-robin" + (", each with --dispatch free" if planned else ""))
    return ""


def _each(other: dict[str, Any]) -> str:
    """What another framework's router needs besides itself, said from its alternative (`_other`): free dispatch (a
    router places each request), and no verl trainer named (its ``without``: ``--verl-trainer`` is refused beside
    another router: the line said to add --router cache-aware to a plan made with --verl-trainer separate-async,
    which `asp schedule` then refused)."""
    needs = (["with --dispatch free"] if "--dispatch free" in other["options"] else []) + [
        f"without {option}" for option in other.get("without", [])]
    return f", each {' and '.join(needs)}" if needs else ""
