"""The layers of docs/architecture.md hold: every import points down (or within its own room), no circle, no
oversized module, and schedules stay byte-identical to the ones the architecture step started from."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "asp_cli"

# Rooms from the bottom up; a module may import its own room and the rooms below it (docs/architecture.md).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "columns", "limits", "testhooks"),
    ("settings", "fingerprint", "output"),
    ("costmodel", "schedule_format", "reading"),
    ("predict",),
    ("sim",),
    ("arrange",),
    ("bench",),
    ("integrate",),
    ("report",),
    ("cli",),
)
LEVEL = {room: level for level, rooms in enumerate(LAYERS) for room in rooms}
# The package's front door re-exports every twin (lazily); `python -m asp_cli` runs the command line.
FACADES = {"asp_cli", "asp_cli.__main__"}
MAX_MODULE_LINES = 700


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(path: Path) -> set[str]:
    """Every asp_cli module a file imports, at module level or inside functions."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("asp_cli"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("asp_cli"):
            assert node.level == 0, f"{path}: relative import; asp_cli imports are absolute"
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


MODULES = _modules()


def test_every_room_is_in_a_layer():
    rooms = {_room(m) for m in MODULES if m not in FACADES}
    assert rooms <= set(LEVEL), f"rooms missing from LAYERS (and docs/architecture.md): {rooms - set(LEVEL)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m not in FACADES))
def test_imports_point_down(module):
    level = LEVEL[_room(module)]
    for imported in sorted(_imports(MODULES[module])):
        target = imported if imported in MODULES else imported.rsplit(".", 1)[0]
        if target not in MODULES or target in FACADES and imported == "asp_cli.__version__":
            continue
        if target == "asp_cli":
            continue  # `from asp_cli import __version__` / `columns`: checked through the name itself
        assert LEVEL[_room(target)] <= level, (
            f"{module} (layer {level}) imports {target} (layer {LEVEL[_room(target)]}): imports point down only")


def test_no_import_circle():
    graph = {m: {t for i in _imports(p) for t in (i, i.rsplit(".", 1)[0]) if t in MODULES and t not in FACADES
                 and t != m and not MODULES[t].name == "__init__.py"}
             for m, p in MODULES.items() if m not in FACADES}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join([*trail[trail.index(nxt):], nxt]))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_oversized(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_MODULE_LINES, f"{module}: {lines} lines; split it by job (docs/architecture.md)"


def test_command_line_does_not_import_the_heavy_libraries():
    import subprocess
    import sys

    code = ("import sys, asp_cli, asp_cli.cli.main; "
            "print(sorted(m for m in ('polars', 'numpy', 'sklearn', 'pyarrow', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# Two digests per case, of sample_data/prompts.jsonl (named so) with these settings and this command line:
# - ROWS: SHA-256 of the rows (as CSV) of the interleave arrangement, made with the code before the
#   architecture step (commit cdf4168): the step and everything since kept today's arrangement row for row.
# - FILE: SHA-256 of the whole file with today's defaults (`--arrangement auto`), so any change of bytes shows;
#   a change made on purpose updates it in the same commit, saying why. Updates: the `trainer`, `engine` and
#   `arrangement` settings and the `arrangement` metadata key (issue 17); each candidate's expected time with
#   free dispatch in that key; the `dispatch` setting (free by default, auto judging under it), the sorts cut
#   as the benchmark's equal-footing sorts, the common-scale draws and the trial over several epochs; the
#   per-step candidate; the `steps` setting; the shuffle candidate drawn as the random baselines draw it; an
#   input that fits the sample judged over at least two epochs; the `kv_budget` setting, and the KV accounting
#   of the choice and of each candidate (the rows unchanged: on the sample data the budget does not bind); each
#   candidate's expected rollout (`expected_rollout_s`, which says whether the trainer binds); each candidate's
#   time under every draw (`end_to_end_s_by_draw`); the summary's count of instances given no minibatch
#   (`idle_instances`, with every planned instance now in the balance); the preset's name and KV capacity; the
#   choice's gain over the candidate shuffle and its range over the draws (`expected_gain_over_shuffle`,
#   `gain_over_shuffle_by_draw`: keys added, nothing else changed); under `--steps any` the fastest candidate
#   with representative steps where the pick's are not (`representative_alternative`: a key added, nothing else
#   changed); each candidate's padding under the draws (`expected_padding_fraction`: a key added); the time under
#   the other dispatch said of the pick and its first two fallbacks only (2026-12-06: the key dropped from the
#   others, every row, pick and expected time unchanged); a warning in the summary that the epoch's prompts leave a
#   partial last batch for any trainer, not only a schedule-following one, and over several epochs where no step
#   is cut short (2026-12-06: every row unchanged); that warning naming what OpenRLHF does with the partial batch
#   (2026-12-06: every row unchanged); and what MindSpeed-RL does with it (2026-12-07: every row unchanged).
COMMAND_LINE = ["asp", "schedule", "prompts.jsonl", "-o", "OUT"]
GOLDEN = {
    "defaults": ({}, "e704fc8b79216d3f8097e9784734aa723b10ee4e46d79a40116e50bc835a97ef",
                 "2da7249682fd07d1b94f03c3fdd0c3f34f66fdde38acfae63c0af2f218c907be"),
    "two epochs, lag 2, 8 instances, seed 3": (
        {"epochs": 2, "max_lag": 2, "instances": 8, "seed": 3},
        "00b87b60de0f7b6d774d6a27da4542008a34d1f66ea943bef190bf0e8e92430b",
        "b1f7cc01a1c2bc2282e68ae5350087547c6f6ca8a5410ad307e93b13808c4588"),
}


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_schedules_are_byte_identical_to_the_recorded_ones(tmp_path, monkeypatch, case):
    import polars as pl

    from asp_cli import ScheduleSettings, schedule

    values, rows_digest, file_digest = GOLDEN[case]
    monkeypatch.chdir(PACKAGE.parent)  # the metadata records input paths as given
    inputs = [Path("sample_data/prompts.jsonl")]
    interleave = schedule(inputs, None, settings=ScheduleSettings(arrangement="interleave", **values),
                          command_line=COMMAND_LINE)
    assert hashlib.sha256(interleave.frame.write_csv().encode()).hexdigest() == rows_digest
    out = tmp_path / "a.parquet"
    schedule(inputs, out, settings=ScheduleSettings(**values), command_line=COMMAND_LINE)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == file_digest
    assert pl.read_parquet(out).height == interleave.frame.height
