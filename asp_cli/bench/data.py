"""Where the benchmark's real length data comes from: the copy that ships, or a folder given with ``--data``.

What may ship ships inside the package (``asp_cli/bench/data``: the Apache-2.0 ZeroEval output lengths of the
MIT GSM8K and MATH problems, see its README.md), so the GSM8K and MATH level-5 workloads run from a clone or
an installed package. The AIME R1-distill lengths have no license upstream and never ship: they are read at
run time from a ``--data`` folder that holds ``aime_r1distill1.5b_lengths/`` (docs/simulation.md), and a workload that
needs them is skipped when there is none; so are AlpacaEval's output lengths (``alpaca_eval_outputs/``, CC BY-NC
4.0: evaluation only), the held-out chat workloads' data.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

import polars as pl

from asp_cli.errors import InputError, missing_hint

BUNDLED = Path(__file__).resolve().parent / "data"
ZEROEVAL = "zeroeval_math_gsm_outputs"
AIME = "aime_r1distill1.5b_lengths"
ALPACA = "alpaca_eval_outputs"
# The folder of real data each benchmark source needs, and whether a copy of it ships.
SOURCE_FOLDERS: dict[str, str] = {"gsm8k": ZEROEVAL, "math-l5": ZEROEVAL, "aime": AIME, "chat": ALPACA}
SHIPPED_FOLDERS: frozenset[str] = frozenset({ZEROEVAL})
WHY_NOT_SHIPPED: dict[str, str] = {AIME: "no license upstream", ALPACA: "CC BY-NC 4.0: evaluation only"}


def check_data_folder(data: Path | None) -> None:
    """A ``--data`` folder that was given must be there."""
    if data is not None and not Path(data).is_dir():
        there = Path(data).exists()
        what = "is a file, not a folder" if there else "no such folder"
        raise InputError(f"--data {data}: {what}" + ((not there and missing_hint(data)) or "; name the folder of real "
                         "length data (what it holds: docs/simulation.md, \"asp bench\"), or leave --data out to run "
                         "what ships"))


def data_folder_warning(data: Path | None) -> str | None:
    """What to say of a ``--data`` folder that holds none of the folders the benchmark reads (None: it holds one)."""
    if data is None:
        return None
    wanted = sorted({f for f in SOURCE_FOLDERS.values() if f not in SHIPPED_FOLDERS})
    if any((Path(data) / f).is_dir() for f in wanted):
        return None
    return (f"--data {data} holds none of the folders the benchmark reads ({', '.join(wanted)}); what they hold: "
            "docs/simulation.md")


def _folder(data: Path | None, name: str) -> Path | None:
    if data is not None and (Path(data) / name).is_dir():
        return Path(data) / name
    return None


def source_available(source: str, data: Path | None) -> bool:
    """Whether a source's data is in ``data`` or ships with asp."""
    folder = SOURCE_FOLDERS[source]
    return folder in SHIPPED_FOLDERS or _folder(data, folder) is not None


def missing_folders(sources: Iterable[str], data: Path | None) -> list[str]:
    """The data folders ``sources`` need that neither ``data`` nor the package holds, in first-use order."""
    missing: list[str] = []
    for source in sources:
        folder = SOURCE_FOLDERS[source]
        if not source_available(source, data) and folder not in missing:
            missing.append(folder)
    return missing


def zeroeval_tables(data: Path | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """ZeroEval's problems (dataset, id, problem) and output lengths (dataset, id, generator, output_chars).

    From ``data/zeroeval_math_gsm_outputs`` when that folder is there, else from the copy that ships (the
    same rows; scripts/make_bench_data.py makes it).
    """
    folder = _folder(data, ZEROEVAL)
    if folder is None:
        problems = pl.read_parquet(BUNDLED / "zeroeval_problems.parquet")
        lengths = pl.read_parquet(BUNDLED / "zeroeval_lengths.parquet")
    else:
        problems = read_ndjson(folder / "problems.jsonl")
        lengths = pl.read_csv(folder / "lengths.csv.gz", schema_overrides={"id": pl.String})
    return (problems.select("dataset", pl.col("id").cast(pl.String), "problem"),
            lengths.select("dataset", pl.col("id").cast(pl.String), "generator",
                           pl.col("output_chars").cast(pl.Int64)))


@contextlib.contextmanager
def reading_folder(folder: str) -> Iterator[None]:
    """Turn what a damaged benchmark data folder raises (a file missing, a column missing or of another type)
    into one `InputError` naming the folder; asp's own errors pass through."""
    try:
        yield
    except (OSError, pl.exceptions.PolarsError, TypeError, ValueError, KeyError) as exc:  # a missing or odd value
        # (an empty length cell raised TypeError from int(None): exit 70) is the data's fault here too
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise InputError(f"{folder}/: unreadable benchmark data ({first}); give --data a folder whose {folder}/ "
                         "holds the files docs/simulation.md names") from None


def read_ndjson(path: Path) -> pl.DataFrame:
    """A JSON-lines file of the benchmark data, its nesting checked (`asp_cli.limits`) before Polars parses it."""
    from asp_cli import limits

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    hits = limits.json_depth_violations(data, per_line=True)
    if hits:
        line, _ = limits.line_and_column(data, hits[0])
        raise InputError(f"{path}:{line}: JSON nested more than {limits.MAX_NESTING_DEPTH} levels deep; "
                         f"{limits.DEPTH_FIX}")
    return pl.read_ndjson(io.BytesIO(data))


def alpaca_tables(data: Path | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """AlpacaEval's instructions (id, problem) and output lengths (id, generator, output_chars); never ships."""
    folder = _folder(data, ALPACA)
    if folder is None:
        where = f"{data} has no {ALPACA}/" if data is not None else f"{ALPACA} does not ship ({WHY_NOT_SHIPPED[ALPACA]})"
        raise InputError(f"{where}; give --data FOLDER holding {ALPACA}/")
    problems = read_ndjson(folder / "instructions.jsonl")
    lengths = pl.read_csv(folder / "lengths.csv.gz", schema_overrides={"instruction_id": pl.String})
    return (problems.select(pl.col("instruction_id").cast(pl.String).alias("id"), pl.col("instruction").alias("problem")),
            lengths.select(pl.col("instruction_id").alias("id"), pl.col("results_dir").alias("generator"),
                           pl.col("output_chars").cast(pl.Int64)))


def aime_folder(data: Path | None) -> Path:
    """The AIME R1-distill folder under ``data``; it never ships."""
    folder = _folder(data, AIME)
    if folder is None:
        where = f"{data} has no {AIME}/" if data is not None else f"{AIME} does not ship ({WHY_NOT_SHIPPED[AIME]})"
        raise InputError(f"{where}; give --data FOLDER holding {AIME}/ (what it holds: docs/simulation.md)")
    return folder


def unavailable_workloads(specs: dict, names: Iterable[str] | None, data: Path | None) -> dict[str, list[str]]:
    """Of the workloads asked for (when ``names`` is None, all of ``specs`` but the held-out ones, which run only
    when named), those whose data is missing, each with the folders it lacks."""
    chosen = ({n: s for n, s in specs.items() if not getattr(s, "held_out", False)} if names is None
              else {n: specs[n] for n in names if n in specs})
    return {name: missing for name, spec in chosen.items() if (missing := missing_folders(spec.sources, data))}


def unavailable_text(unavailable: dict[str, list[str]], data: Path | None) -> str:
    """Which workloads cannot run, why, and the fix, in one sentence."""
    folders = sorted({f for missing in unavailable.values() for f in missing})
    named = " and ".join(f"{f}/" for f in folders)
    reasons = sorted({WHY_NOT_SHIPPED[f] for f in folders if f in WHY_NOT_SHIPPED})
    them = "it" if len(folders) == 1 else "them"
    where = f"--data {data} does not hold {them}" if data is not None else "no --data folder was given"
    verb = "needs" if len(unavailable) == 1 else "need"
    return (f"{', '.join(unavailable)} {verb} {named}, which {'does' if len(folders) == 1 else 'do'} not ship"
            + (f" ({'; '.join(reasons)})" if reasons else "")
            + f", and {where}; give --data FOLDER holding {them} (what {them} hold{'s' if len(folders) == 1 else ''}: docs/simulation.md)")
