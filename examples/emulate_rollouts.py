#!/usr/bin/env python3
"""Stand-in for a rollout engine: replay an asp schedule and write the rollout log a real run would emit.

    python examples/emulate_rollouts.py schedule.parquet -o rollouts.jsonl --epoch-label 0

The log has one JSON line per sample: ``prompt_id``, ``sample`` (0..n-1), ``response_tokens``,
``truncated``, ``epoch`` (the ``--epoch-label``: the training epoch this replay stands for; of a schedule of several
epochs replayed whole, each row's own, ``--epoch-label`` for its first and the next numbers for the others, each
drawn afresh, so that ``asp observe`` reads the log as those epochs' samples), ``instance``,
``minibatch``, ``seq`` and ``train_step`` (from the schedule). Rows follow the schedule's dispatch order. The log
is written as asp writes its outputs: beside it, then renamed into place, so an interrupted run leaves no half log.
Output is deterministic for a given schedule, ``--seed`` and ``--epoch-label``. ``--seed`` is the emulated
world (each prompt's true mean comes from it): keep it for every epoch of a run, and vary ``--epoch-label``.

Where the lengths come from:

- Prompts with real outputs (the GSM8K and MATH level-5 ids of ``sample_data/prompts.jsonl``): each sample is
  the length of one of the ~40 models' real answers to that prompt in ZeroEval (github.com/yuchenlin/ZeroEval,
  commit 570c6269, Apache-2.0), drawn with replacement, whitespace tokens times 1.3 (a typical BPE
  tokens-per-word ratio). Read from ``../shared/data/zeroeval_math_gsm_outputs/lengths.csv.gz`` when present,
  else from the copy derived from it in ``examples/data/zeroeval_lengths.csv.gz`` (same numbers).
- Other prompts (a documented noise model): the prompt's true mean length is the schedule's (or the
  ``--truth-from`` schedule's) ``predicted_mean_tokens`` (else ``predicted_tokens``) times exp(N(0, 0.5)), drawn once per prompt id, so it is
  the same every epoch, as real per-prompt means are (about 0.9 correlation between runs); each sample is
  that mean times a log-normal factor with 0.28 coefficient of variation (the median within-prompt CV of
  8-sample reasoning rollouts). Lengths are capped at the schedule's ``max_response_tokens`` and flagged
  ``truncated`` there.

Because the noise model's per-prompt error is stable, history from one epoch carries real information
about the next, which is what the feedback loop in examples/pipeline.sh shows.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import secrets
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
SHARED_LENGTHS = HERE.parent.parent / "shared" / "data" / "zeroeval_math_gsm_outputs" / "lengths.csv.gz"
SHIPPED_LENGTHS = HERE / "data" / "zeroeval_lengths.csv.gz"
TOKENS_PER_WORD = 1.3
PROMPT_ERROR_SIGMA = 0.5  # log-scale spread of a prompt's true mean around the prediction
SAMPLE_CV = 0.28  # within-prompt coefficient of variation


def derive_lengths(shared_csv: Path) -> pl.DataFrame:
    """ZeroEval's per-model lengths as (prompt_id, output_ws_tokens 'a;b;c'), ids as sample_data names them."""
    frame = pl.read_csv(shared_csv, schema_overrides={"id": pl.String})
    prefix = pl.when(pl.col("dataset") == "gsm").then(pl.lit("gsm-")).otherwise(pl.lit("math-l5-"))
    frame = frame.with_columns((prefix + pl.col("id")).alias("prompt_id"))
    return (
        frame.sort("results_file")
        .group_by("prompt_id", maintain_order=True)
        .agg(pl.col("output_ws_tokens").cast(pl.String).str.join(";"))
        .sort("prompt_id")
    )


def real_lengths() -> dict[str, np.ndarray]:
    """prompt_id -> real response lengths in tokens (one per model)."""
    if SHARED_LENGTHS.is_file():
        frame = derive_lengths(SHARED_LENGTHS)
    elif SHIPPED_LENGTHS.is_file():
        frame = pl.read_csv(SHIPPED_LENGTHS)
    else:
        return {}
    out = {}
    for prompt_id, joined in frame.iter_rows():
        words = np.array([int(x) for x in joined.split(";")], dtype=np.float64)
        out[prompt_id] = np.maximum(1, np.round(words * TOKENS_PER_WORD))
    return out


def _stable_seed(*parts: object) -> int:
    digest = hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def emulate(schedule: Path, *, epoch_label: int, seed: int, schedule_epoch: int | None,
            truth_from: Path | None = None) -> pl.DataFrame:
    import pyarrow.parquet as pq

    meta = json.loads(pq.read_schema(schedule).metadata[b"asp.schedule"])
    settings = meta["settings"]
    n = int(settings["samples_per_prompt"])
    cap = int(settings["max_response_tokens"])
    rows = pl.read_parquet(schedule).sort("seq")
    if schedule_epoch is not None:
        rows = rows.filter(pl.col("epoch") == schedule_epoch)
    # Each schedule epoch its own label, counted from `epoch_label`: one label for every epoch logged each prompt's
    # same draws once an epoch, which `asp observe` refuses as samples logged twice (a library newcomer's round).
    first_epoch = int(rows["epoch"].min()) if rows.height else 0
    mean_col = "predicted_mean_tokens" if "predicted_mean_tokens" in rows.columns else "predicted_tokens"
    # The noise model's true means come from one schedule's predictions: a later epoch's schedule, planned with
    # history, predicts other means, and drawing its truth from them made the truth move with the plan (epoch 1
    # of examples/pipeline.sh emulated 22% more tokens than epoch 0, and looked slower for its history).
    reference = rows if truth_from is None else pl.read_parquet(truth_from).sort("seq")
    reference_col = "predicted_mean_tokens" if "predicted_mean_tokens" in reference.columns else "predicted_tokens"
    true_base = dict(reference.unique("prompt_id", keep="first", maintain_order=True)
                     .select("prompt_id", reference_col).iter_rows())
    real = real_lengths()
    sigma = np.sqrt(np.log1p(SAMPLE_CV**2))
    records = []
    for row in rows.iter_rows(named=True):
        prompt_id = row["prompt_id"]
        label = epoch_label + int(row["epoch"]) - first_epoch
        rng = np.random.default_rng(_stable_seed(seed, label, prompt_id))
        if prompt_id in real:
            lengths = rng.choice(real[prompt_id], size=n, replace=True)
        else:
            # The prompt's own error is seeded by its id only: the same in every epoch.
            truth = np.random.default_rng(_stable_seed(seed, "truth", prompt_id))
            base = true_base.get(prompt_id, row[mean_col])
            mean = max(1.0, float(base)) * float(np.exp(truth.normal(0.0, PROMPT_ERROR_SIGMA)))
            lengths = mean * rng.lognormal(-sigma**2 / 2, sigma, size=n)
        lengths = np.minimum(np.maximum(1, np.round(lengths)), cap).astype(np.int64)
        for sample, tokens in enumerate(lengths.tolist()):
            records.append(
                {
                    "prompt_id": prompt_id,
                    "sample": sample,
                    "response_tokens": tokens,
                    "truncated": tokens >= cap,
                    "epoch": label,
                    "instance": row["instance"],
                    "minibatch": row["minibatch"],
                    "seq": row["seq"],
                    "train_step": row["train_step"],
                }
            )
    return pl.DataFrame(records)


def write_atomically(output: Path, write: Callable[[Path], object]) -> None:
    """Write ``output`` as asp writes its own: into a temporary file of its own name beside the target (a symlink's
    target; the link stays a link), renamed into place, and removed if writing fails or is interrupted, so that a
    reader never sees half a log and two runs never share a temporary file."""
    # Absolute: Polars expands a leading ~ in a name it is handed, so under a folder really named ~ the temporary
    # file went to $HOME, was left there, and the rename failed (asp's outputs: `asp_cli.output.as_given`).
    target = Path(os.path.realpath(output)) if output.is_symlink() else Path(os.path.abspath(output))
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _interrupt(signum: int, frame: object) -> None:  # noqa: ARG001 - the signal handler signature
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """SIGTERM and SIGHUP (a job's time limit, a closed session) stop the script as Ctrl-C does, so that
    `write_atomically` removes its temporary file: their default killed it on the spot and left the file beside the
    log (asp's own commands take them so: docs/errors.md, E29). One the parent ignores (nohup) stays ignored."""
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _interrupt)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("schedule", type=Path, nargs="?")
    parser.add_argument("-o", "--output", type=Path, help="The rollout log to write (.jsonl).")
    parser.add_argument("--epoch-label", type=int, default=0,
                        help="The training epoch to record in the log (of a schedule of several epochs replayed "
                             "whole, its first: each later epoch's rows get the next numbers).")
    parser.add_argument("--schedule-epoch", type=int, default=None,
                        help="Replay one schedule epoch, recorded as --epoch-label (default all, each its own).")
    parser.add_argument("--seed", type=int, default=0,
                        help="The emulated world: each prompt's true mean is drawn from it and its id. Keep it the "
                             "same for every epoch of one run (the samples already differ by --epoch-label); a new "
                             "seed is a different policy, whose history says little about the old one's.")
    parser.add_argument("--truth-from", type=Path, default=None,
                        help="The schedule whose predicted means the noise model's true means come from (default: "
                             "the one replayed); give every epoch the first epoch's, so that the truth stays put.")
    parser.add_argument("--write-shipped-lengths", action="store_true",
                        help=f"Rebuild {SHIPPED_LENGTHS.relative_to(HERE.parent)} from ../shared/data and exit.")
    args = parser.parse_args(argv)
    if args.write_shipped_lengths:
        buffer = io.BytesIO()
        derive_lengths(SHARED_LENGTHS).write_csv(buffer)
        write_atomically(SHIPPED_LENGTHS, lambda tmp: tmp.write_bytes(gzip.compress(buffer.getvalue(), mtime=0)))
        return 0
    if args.schedule is None or args.output is None:
        parser.error("give a schedule and -o OUTPUT")
    if not args.schedule.is_file():
        print(f"Error: {args.schedule}: no such schedule", file=sys.stderr)
        return 3
    if args.truth_from is not None and not args.truth_from.is_file():
        print(f"Error: {args.truth_from}: no such schedule (--truth-from)", file=sys.stderr)
        return 3
    # Absolute, for Polars: a schedule under a folder named ~ was read from $HOME's of that name (as `write_atomically`).
    args.schedule = Path(os.path.abspath(args.schedule))
    args.truth_from = None if args.truth_from is None else Path(os.path.abspath(args.truth_from))
    log = emulate(args.schedule, epoch_label=args.epoch_label, seed=args.seed, schedule_epoch=args.schedule_epoch,
                  truth_from=args.truth_from)
    write_atomically(args.output, log.write_ndjson)
    ids = log["prompt_id"].unique()
    labels = log["epoch"].unique().sort().to_list() if log.height else []
    if len(labels) > 1:  # each row its own epoch, said: a log of one label was what a user of --epoch-label expected
        which = f"{labels[0]} and {labels[1]}" if len(labels) == 2 else f"{labels[0]} to {labels[-1]}"
        print(f"Note: the schedule's {len(labels)} epochs are logged as epochs {which} (each row "
              f"its own, counted from --epoch-label {args.epoch_label}); pass --schedule-epoch E for one epoch's log",
              file=sys.stderr)
    matched = int(ids.is_in(list(real_lengths())).sum())
    print(f"Wrote {args.output}: {log.height:,} samples of {ids.len():,} prompts, {matched:,} of them with real "
          f"ZeroEval lengths (the others drawn around the schedule's predictions)", file=sys.stderr)
    if not matched:
        # A verl-layout file without an id column is scheduled by row number, which names none of the shipped
        # lengths' prompts: every length was then the noise model's (a newcomer's verl round read it as real).
        print("Warning: no prompt id of the schedule has real lengths shipped (they are keyed by the sample data's "
              "ids, e.g. gsm-gsm8k-main-test-#0): every length is drawn around the predictions, which flatters "
              "them; schedule sample_data/prompts.jsonl itself, or a file that keeps its id column (asp schedule "
              "--id-key)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    stop_on_signals()
    sys.exit(main())
