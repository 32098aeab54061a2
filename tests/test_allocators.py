"""The `asp` process asks its libraries' allocators to give freed memory back (asp_cli/cli/allocators.py)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

from asp_cli.cli.allocators import ENVIRONMENT, MALLOPT, OPT_OUT

_PROBE = """
import json, os, sys
from asp_cli.cli.allocators import lean_allocators

if sys.argv[1:] == ["polars-first"]:
    import polars
applied = lean_allocators()
import pyarrow
print(json.dumps({"applied": applied, "pool": pyarrow.default_memory_pool().backend_name,
                  "env": {k: os.environ.get(k) for k in ("ARROW_DEFAULT_MEMORY_POOL", "_RJEM_MALLOC_CONF")}}))
"""


def _run(*args: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in {*ENVIRONMENT, *MALLOPT, OPT_OUT}}
    out = subprocess.run([sys.executable, "-c", _PROBE, *args], env={**clean, **env}, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_the_command_line_asks_for_the_system_pool_and_eager_jemalloc_purging():
    seen = _run()
    assert seen["env"] == ENVIRONMENT
    assert seen["pool"] == "system"
    assert {k: seen["applied"][k] for k in ENVIRONMENT} == ENVIRONMENT
    if platform.libc_ver()[0] == "glibc":
        assert set(MALLOPT) <= set(seen["applied"])


def test_what_the_user_set_in_the_environment_wins():
    seen = _run(ARROW_DEFAULT_MEMORY_POOL="mimalloc", MALLOC_ARENA_MAX="4")
    assert seen["pool"] == "mimalloc"
    assert "ARROW_DEFAULT_MEMORY_POOL" not in seen["applied"]
    assert "MALLOC_ARENA_MAX" not in seen["applied"]
    assert seen["env"]["_RJEM_MALLOC_CONF"] == ENVIRONMENT["_RJEM_MALLOC_CONF"]


def test_asp_lean_memory_0_keeps_every_default():
    seen = _run(**{OPT_OUT: "0"})
    assert seen["applied"] == {}
    assert seen["env"] == {"ARROW_DEFAULT_MEMORY_POOL": None, "_RJEM_MALLOC_CONF": None}
    assert seen["pool"] != "system"


def test_nothing_is_set_in_the_environment_once_polars_has_started():
    seen = _run("polars-first")
    # (Polars sets a _RJEM_MALLOC_CONF of its own when it starts without one.)
    assert not set(ENVIRONMENT) & set(seen["applied"])
    assert seen["env"]["ARROW_DEFAULT_MEMORY_POOL"] is None
    assert seen["env"]["_RJEM_MALLOC_CONF"] != ENVIRONMENT["_RJEM_MALLOC_CONF"]


def test_the_entry_point_applies_them_before_any_command_imports_a_library():
    from asp_cli.cli import entry

    source = open(entry.__file__, encoding="utf-8").read()
    main = source[source.index("def main()"):]
    assert main.index("lean_allocators()") < main.index("_run()")


def test_polars_defaults_inherited_from_a_parent_process_do_not_count_as_the_users():
    seen = _run(_RJEM_MALLOC_CONF="dirty_decay_ms:500,muzzy_decay_ms:1000")
    assert seen["env"]["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:500,muzzy_decay_ms:1000," + ENVIRONMENT["_RJEM_MALLOC_CONF"]
    mine = _run(_RJEM_MALLOC_CONF="dirty_decay_ms:2000")
    assert mine["env"]["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:2000"
