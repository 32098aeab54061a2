"""The lead of docs/benchmarks.md: asp's gain over the best equal-footing baseline, per engine and workload.

The equal-footing tables of docs/benchmarks.md ("Simulated end-to-end time against baselines", written by
`python scripts/bench_simulate.py`) each hold one engine and lag rule, a row per workload. A reader who runs one
engine has to find its table among a dozen. This script reads those tables back out of the document and lays the
gain column of each beside the others, one row per workload, with the true-lengths ceiling of the same tables
beside it, so the lead of the page cannot drift from the tables under it (tests/test_docs.py renders it and
compares). It measures nothing: rerun `python scripts/bench_simulate.py` for the tables, then this
(`--write` puts the matrices into the document in place).

    python scripts/headline_matrix.py            # print the matrices
    python scripts/headline_matrix.py --write    # replace them in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "## Simulated end-to-end time against baselines"
SECTION_END = "### One seed in full"
BEGIN = "<!-- headline matrix: written by scripts/headline_matrix.py from the tables below -->"
END = "<!-- end of the headline matrix -->"

# (column heading, engine, trainer, max_lag, the gain's label, the reference the table is over or None)
COLUMNS = (
    ("blocking `generate()`, lag 2", "continuous", "arrival order", "2", "asp (auto)", None),
    ("padded `static`, lag 2", "static", "arrival order", "2", "asp (auto)", None),
    ("servers that refill, lag 2", "streaming", "arrival order", "2", "asp (auto)", "least-pending"),
    ("servers, no lag bound", "streaming", "arrival order", "none", "asp (auto)", None),
    ("servers, synchronous", "streaming", "arrival order", "0", "asp (auto)", None),
    ("blocking, trainer follows `train_step`, no bound", "continuous", "the order train_step assigns", "none",
     "asp (auto)", None),
)


def _caption(line: str) -> dict[str, str]:
    """What a table's caption line says of its engine, trainer, lag bound, seeds, reference and gain."""
    found = {
        "engine": re.match(r"Engine `(\w+)`", line),
        "trainer": re.search(r"trainer taking groups in (arrival order|the order train_step assigns)", line),
        "lag": re.search(r"max_lag (\w+)", line),
        "seeds": re.search(r"(\d+) workload seeds", line),
        "reference": re.search(r"end-to-end time over \*\*(.+?)\*\*", line),
        "gain": re.search(r'"gain" is (asp \(.+?\)) against it', line),
    }
    return {key: (match.group(1) if match else "") for key, match in found.items()}


def tables(doc: str) -> list[tuple[dict[str, str], dict[str, list[str]]]]:
    """Each equal-footing table of the section: its caption's fields and its rows by workload (cells as written)."""
    start = doc.index(SECTION)
    lines = doc[start:doc.index(SECTION_END, start)].splitlines()
    found = []
    for i, line in enumerate(lines):
        if not line.startswith("Engine `"):
            continue
        rows = {}
        for row in lines[i + 1:]:
            if row.startswith("Engine `") or rows and not row.startswith("|"):
                break
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            if row.startswith("|") and cells[0] not in ("workload", "---"):
                rows[cells[0]] = cells
        found.append((_caption(line), rows))
    return found


def _ratio(cell: str) -> float:
    """The mean of a cell written `name 0.974 +- 0.026` or `0.974 +- 0.026`."""
    return float(re.search(r"([0-9.]+) \+- [0-9.]+$", cell).group(1))


def matrices(doc: str) -> str:
    """The two matrices, as markdown, from the document's own tables."""
    chosen = []
    for heading, engine, trainer, lag, gain, reference in COLUMNS:
        match = next(((caption, rows) for caption, rows in tables(doc)
                      if (caption["engine"], caption["trainer"], caption["lag"], caption["gain"]) == (engine, trainer, lag, gain)
                      and reference in (None, caption["reference"])), None)
        if match is None:
            raise SystemExit(f"docs/benchmarks.md has no table of {engine}, {trainer}, max_lag {lag}, {gain}")
        chosen.append((heading, *match))
    workloads = list(dict.fromkeys(w for _, _, rows in chosen for w in rows))
    head = "| workload | " + " | ".join(f"{h} ({c['seeds']} seeds)" for h, c, _ in chosen) + " |"
    rule = "|---|" + "---:|" * len(chosen)
    gains, ceilings = [head, rule], [head, rule]
    for workload in workloads:
        gain_cells, ceiling_cells = [], []
        for _, _, rows in chosen:
            cells = rows.get(workload)
            if cells is None:
                gain_cells.append("")
                ceiling_cells.append("")
                continue
            best = cells[1].rsplit(" ", 3)[0].replace(" (asp sizes)", "")
            gain_cells.append(f"{cells[3]} ({best})")
            ceiling_cells.append(f"{1 - _ratio(cells[5]) / _ratio(cells[1]):+.1%}")
        gains.append(f"| {workload} | " + " | ".join(gain_cells) + " |")
        ceilings.append(f"| {workload} | " + " | ".join(ceiling_cells) + " |")
    return "\n".join([
        BEGIN, "",
        "**asp (`--arrangement auto`, the default) against the best equal-footing baseline** (the fastest of every "
        "baseline its table holds, picked after the fact; its name in brackets, as docs/simulation.md's `--compare` "
        "names it: on blocking engines the sorts and the shuffle cut into asp's own minibatch sizes; on servers a "
        "sort with a router in brackets is fed one group at a time through it, a bare sort is verl's chunks of the "
        "sorted epoch, each kept to one server): mean gain over the seeds +- its paired standard error; "
        "negative where asp loses; within two standard errors of zero is the seeds' noise. Simulated, on real "
        "lengths, in-sample (auto's constants were set on these workloads). An empty cell: the table does not run "
        "that workload.",
        "", *gains, "",
        "**The same, with the true lengths** (asp's own choice given the true lengths, from the same tables' means: "
        "a yardstick of what a perfect predictor would let asp reach against the same baseline, not a bound; the "
        "lower bound column of each table is the bound):",
        "", *ceilings, "", END])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="replace the matrices in docs/benchmarks.md")
    args = parser.parse_args()
    if not args.write:
        print(matrices(DOC.read_text(encoding="utf-8")))
        return
    rewrite(DOC)


def rewrite(path: Path) -> None:
    """Replace the matrices between their two marker lines in ``path`` with those of its tables (where it has the
    markers: `scripts/bench_simulate.py` calls this after it rewrites its section, on any document it was given)."""
    doc = path.read_text(encoding="utf-8")
    if BEGIN not in doc or SECTION not in doc:
        print(f"{path}: no headline matrix to rewrite (no '{BEGIN}' line, or no tables)")
        return
    before, rest = doc.split(BEGIN, 1)
    path.write_text(before + matrices(doc) + rest.split(END, 1)[1], encoding="utf-8")
    print(f"wrote the headline matrices into {path}")


if __name__ == "__main__":
    main()
