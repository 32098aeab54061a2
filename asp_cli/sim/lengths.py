"""True lengths for a replay: observed ones where given, otherwise drawn around the predictions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from asp_cli.errors import InputError, SettingsError, shown_id
from asp_cli.reading.id_forms import near_misses


# --------------------------------------------------------------------------------------------------------
# Lengths for a schedule: observed ones, or the noise model around the predictions

# The noise model (docs/simulation.md, "Lengths"): a prompt's true mean is its predicted mean times a
# lognormal factor of sigma 0.5 (a predictor's typical error on log length), and each sample is that mean
# times a lognormal factor of sigma 0.3 (the median within-group CV of 0.28 in the AIME R1-distill data,
# ../shared/data/aime_r1distill1.5b_lengths/SOURCE.md). Both factors have mean 1.
PROMPT_SIGMA = 0.5
SAMPLE_SIGMA = 0.3
# Prefill is charged on this many prompt tokens when the schedule has no prompt_tokens column.
DEFAULT_PROMPT_TOKENS = 200


def sample_lengths(
    predicted_mean_tokens: np.ndarray,
    prompt_keys: np.ndarray,
    samples_per_prompt: int,
    *,
    seed: int,
    max_response_tokens: int,
    prompt_sigma: float = PROMPT_SIGMA,
    sample_sigma: float = SAMPLE_SIGMA,
) -> np.ndarray:
    """Lengths drawn around predictions: ``(rows, samples_per_prompt)`` int64, in [1, max_response_tokens].

    ``prompt_keys`` (one integer per row) ties the per-prompt factor to the prompt, so every epoch of a
    prompt shares it.
    """
    rng = np.random.default_rng(seed)
    keys = np.asarray(prompt_keys)
    n_keys = int(keys.max()) + 1 if keys.size else 0
    prompt_factor = np.exp(rng.normal(0.0, prompt_sigma, n_keys) - prompt_sigma**2 / 2)
    sample_factor = np.exp(rng.normal(0.0, sample_sigma, (keys.size, samples_per_prompt)) - sample_sigma**2 / 2)
    mean = np.maximum(np.asarray(predicted_mean_tokens, dtype=np.float64), 1.0) * prompt_factor[keys]
    return np.clip(np.rint(mean[:, None] * sample_factor), 1, max_response_tokens).astype(np.int64)


# A prompt observed fewer times than the group size gets the rest of its group drawn from a log-normal around
# its own samples: their mean log length, their sd shrunk towards the pooled within-prompt sd of the observed
# prompts (of its source, where sources are given) with this many pseudo-degrees of freedom (as
# `asp_cli.predict.history.SPREAD_PRIOR_DOF`), widened by sqrt(1 + 1/k) for the error of the mean of k samples
# (a new sample's predictive spread). With no prompt observed twice the spread is `SAMPLE_SIGMA`.
DRAWN_SAMPLE_PRIOR_DOF = 4.0


def complete_groups(tokens: np.ndarray, offset: np.ndarray, count: np.ndarray, samples_per_prompt: int,
                    rng: np.random.Generator, *, pool: np.ndarray | None = None,
                    max_response_tokens: int = 1 << 30) -> np.ndarray:
    """Each row's group of N lengths: its first N observed ones, and where it has fewer, the rest drawn.

    ``tokens`` holds every row's observed lengths back to back, row r's at ``offset[r]:offset[r] + count[r]``
    (rows may share them: a prompt in several epochs). Returns ``(rows, N)`` int64; a row with none observed
    is left 0. Drawing the rest with replacement from the observed ones (what `asp simulate` and the
    benchmark did before 2026-12-03) makes a group of 8 from 4 samples one with at most 4 distinct lengths and
    one from a single sample a group with no spread at all: on AIME R1-distill (4 samples completed to 8) its
    mean maximum was 11% below 8 real samples', drawn as here 0.5% above (`scripts/check_truth_samples.py`).
    """
    n = samples_per_prompt
    tokens = np.asarray(tokens, dtype=np.int64)
    offset = np.asarray(offset, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    rows = count.size
    logs = np.log(np.maximum(tokens, 1).astype(np.float64))
    cum = np.concatenate([[0.0], np.cumsum(logs)])
    cum2 = np.concatenate([[0.0], np.cumsum(logs * logs)])
    k = np.maximum(count, 1).astype(np.float64)
    mean = (cum[offset + count] - cum[offset]) / k
    dof = np.maximum(count - 1, 0).astype(np.float64)
    squares = np.maximum(cum2[offset + count] - cum2[offset] - k * mean * mean, 0.0)
    own = np.divide(squares, dof, out=np.zeros(rows), where=dof > 0)
    pool = np.zeros(rows, dtype=np.int64) if pool is None else np.asarray(pool, dtype=np.int64)
    pooled = np.full(int(pool.max()) + 1 if rows else 0, SAMPLE_SIGMA**2)
    several = count >= 2
    if several.any():
        spread_sum = np.bincount(pool[several], weights=own[several], minlength=pooled.size)
        spread_rows = np.bincount(pool[several], minlength=pooled.size)
        pooled = np.where(spread_rows > 0, spread_sum / np.maximum(spread_rows, 1),
                          float(own[several].mean()))
    sd = np.sqrt((dof * own + DRAWN_SAMPLE_PRIOR_DOF * pooled[pool]) / (dof + DRAWN_SAMPLE_PRIOR_DOF))
    z = rng.standard_normal((rows, n))
    drawn = np.exp(mean[:, None] + (sd * np.sqrt(1.0 + 1.0 / k))[:, None] * z)
    drawn = np.clip(np.rint(drawn), 1, max_response_tokens).astype(np.int64)
    j = np.arange(n)[None, :]
    real = j < count[:, None]
    observed = tokens[np.where(real, offset[:, None] + j, 0)] if tokens.size else np.zeros((rows, n), np.int64)
    out = np.where(real, observed, drawn)
    out[count == 0] = 0
    return out


def epochs_within(observed: Any, group: int) -> int:
    """The epochs of ``observed`` (a frame of ``prompt_id`` and ``epoch``) where every sample names one, there are
    several, and none holds more than ``group`` samples of a prompt: several epochs' lengths, whose count per prompt
    says nothing of rollout.n; else 0."""
    if observed is None or "epoch" not in observed.columns or not observed.height or observed["epoch"].null_count():
        return 0
    epochs = observed["epoch"].n_unique()
    most = observed.group_by("prompt_id", "epoch").len()["len"].max()
    return int(epochs) if epochs > 1 and isinstance(most, int) and most <= group else 0


def more_samples_fix(group: int, observed_each: int = 0, epochs: int = 0) -> str:
    """The other likely cause of more observed samples of a prompt than the schedule's group holds, and its fix: the
    rollout ran more samples per prompt (a newcomer's verl ran rollout.n=16 on a schedule of 8, and was told only of
    a history of several epochs). ``observed_each``: the samples every prompt has, where all have as many; else 0.
    ``epochs``: the epochs of samples, each within a group (`epochs_within`), where that is so: then not that cause
    (a verl newcomer's two epochs of 4 samples a prompt were told to remake a schedule of 4 with 8, 2026-12-07)."""
    if epochs:
        return f"; each of its {epochs} epochs holds at most {group} samples of a prompt, as the schedule's groups do"
    n = str(observed_each) if observed_each else "N"
    what = (f"every prompt here has {observed_each}" if observed_each
            else "N the samples per prompt it ran")
    return (f"; or, if the rollout ran more samples per prompt than the schedule's {group} (verl's rollout.n), remake "
            f"the schedule with --samples-per-prompt {n} ({what})")


def epochs_in_one_log(group: int, each: int) -> str:
    """Why every prompt holds ``each`` samples, a whole number of groups of ``group``, where no sample says its epoch,
    likeliest first, and the epochs' fix: most often a rollout hook's log appended to every epoch (a slime newcomer's
    after two epochs was told first to remake the schedule with --samples-per-prompt 2N, 2026-12-07). Said by
    `asp simulate`/`asp report --lengths` (`LengthInfo.over_group_warning`) and `asp observe --schedule`."""
    return (f"every prompt here has {each}, {each // group} x {group}, and no sample says its epoch: most often a log "
            f"of {each // group} epochs (a rollout hook's log appended to every epoch, as examples/"
            "slime_length_log.py's and openrlhf_length_log.py's are: its first samples are its first epoch's), "
            "or a log given twice (give each once): observe each epoch's samples into a history with asp "
            "observe --append --epoch E after that epoch")


def epochs_replayed_text(replayed: list[dict]) -> str:
    """`LengthInfo.epochs_text` from its ``epochs_replayed`` as `to_dict` writes it (`asp report` reads it so)."""
    if not replayed:
        return ""
    own = [r["schedule_epoch"] for r in replayed if r["lengths_epoch"] is not None]
    oldest = [r["schedule_epoch"] for r in replayed if r["lengths_epoch"] is None]
    others = sum(r["prompts_from_other_epochs"] for r in replayed)
    parts = []
    if own:
        parts.append(f"schedule {epochs_words(own)} replayed the lengths' own"
                     + (f" ({others:,} prompt{'s' if others != 1 else ''} without a sample of its epoch, its "
                        "other epochs')" if others else ""))
    if oldest:
        parts.append(f"{'schedule ' if not own else ''}{epochs_words(oldest)}, which the lengths do not number, each "
                     "prompt's oldest epoch's")
    return "; ".join(parts)


@dataclass(frozen=True)
class LengthInfo:
    """Where the simulated lengths came from."""

    prompts_observed: int
    prompts_sampled: int
    prompts_drawn: int  # observed, but fewer times than N: the rest of the group drawn (`complete_groups`)
    unknown_ids: int = 0  # distinct ids of the observed lengths that the schedule does not hold
    unknown_examples: tuple[str, ...] = ()
    samples_over_cap: int = 0  # observed samples replayed that are longer than max_response_tokens
    observed_ids: int = 0  # distinct ids of the observed lengths
    written_otherwise: str = ""  # unknown ids that match the schedule's written alike (`reading.id_forms`)
    prompts_over_group: int = 0  # prompts observed more often than a group holds: their first N replayed
    group: int = 0  # N, the samples per prompt
    observed_each: int = 0  # the samples observed of every matched prompt, where all have as many; else 0
    one_epoch: int | None = None  # the epoch every observed sample says it is of, where all say one (-1: none
    # says one, a probe's); else None
    probe_left_out: int = 0  # prompts whose samples without an epoch (a probe's) were left out
    epochs_within: int = 0  # the epochs observed, where each holds at most a group of each prompt (`epochs_within`)
    # per schedule epoch of a schedule of several, where the lengths number epochs: (its epoch, the lengths' epoch it
    # replayed or None for each prompt's oldest, its prompts without a sample of that epoch) (`_epochs_replayed`)
    epochs_replayed: tuple[tuple[int, int | None, int], ...] = ()
    # the epochs whose own samples hold more than a group of a prompt, where every prompt over the group is so: each
    # schedule epoch replayed its own epoch's, and several epochs' samples are not the cause (`over_group_warning`)
    own_epochs_over: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {
            "prompts_with_observed_lengths": self.prompts_observed,
            "prompts_with_sampled_lengths": self.prompts_sampled,
            "prompts_with_drawn_samples": self.prompts_drawn,
            "unknown_ids": self.unknown_ids,
            "unknown_id_examples": list(self.unknown_examples),
            "samples_over_max_response_tokens": self.samples_over_cap,
            "prompts_with_probe_samples_left_out": self.probe_left_out,
            "epochs_replayed": [{"schedule_epoch": e, "lengths_epoch": own, "prompts_from_other_epochs": others}
                                for e, own, others in self.epochs_replayed],
        }

    def epochs_text(self) -> str:
        """Which epoch of the lengths each schedule epoch replayed, said where the schedule holds several and the
        lengths number theirs ("" otherwise): the default replayed the oldest epoch in every one without a word."""
        return epochs_replayed_text([{"schedule_epoch": e, "lengths_epoch": own, "prompts_from_other_epochs": others}
                                     for e, own, others in self.epochs_replayed])

    def over_group_warning(self) -> str:
        """Said where prompts were observed more often than a group holds: a history of several epochs given as
        --lengths replayed its oldest epoch without a word (a newcomer's round); "" where none was."""
        if not self.prompts_over_group:
            return ""
        many = self.prompts_over_group
        each, group = self.observed_each, self.group
        if self.one_epoch == -1 and each and group and each % group == 0:
            # Every prompt k whole groups, none with an epoch: most often a log appended to every epoch (the slime
            # and OpenRLHF hooks' in examples/), which a slime newcomer's round was told to remake the schedule with
            # --samples-per-prompt 2N for, the likeliest fix last and inside a parenthesis about verl (2026-12-07).
            return (f"{many:,} prompt{'s have' if many != 1 else ' has'} more observed samples than a group holds "
                    f"({group}): the first {group} of each, in the file's order, are replayed; "
                    + epochs_in_one_log(group, each) + ", and replay one with --lengths-epoch E; where the "
                    f"rollout ran {each} samples per prompt (or a probe did, as --lengths-epoch -1 picks), remake the "
                    f"schedule with --samples-per-prompt {each}")
        # Each schedule epoch replayed its own, and two or more of them hold more than a group: not "the oldest" (a
        # log of three epochs given twice under two names was told to pick one epoch, a hostile review 2026-12-07).
        own = len(self.own_epochs_over) > 1
        if self.one_epoch is not None or own:  # not a history of several epochs (what --lengths-epoch E leaves, too)
            n = str(self.observed_each) if self.observed_each else "N"
            what = (f"every prompt here has {self.observed_each}" if self.observed_each
                    else "N the samples per prompt it ran")
            # -1: samples without an epoch alone (a probe's: what --lengths-epoch -1 leaves), of no epochs at all
            of = (f"of {epochs_words(list(self.own_epochs_over))} each, every schedule epoch replaying its own: a log "
                  "given twice (give each once), or a rollout of" if own else
                  f"of epoch {self.one_epoch} alone: a log given twice (give each once), or a rollout of"
                  if self.one_epoch >= 0 else "samples without an epoch alone (a probe's, as --lengths-epoch -1 "
                  "picks, or logs of more than one epoch observed without --epoch, as a verl run's step dumps observed "
                  "at once are: observe each epoch's with --epoch E): a log given twice (give each once), or one "
                  "generated with")
            rollout_n = " (verl's rollout.n)" if own or self.one_epoch >= 0 else ""
            return (f"{many:,} prompt{'s have' if many != 1 else ' has'} more observed samples than a group holds "
                    f"({self.group}): the first {self.group} of each, in the file's order, are replayed; they are {of} "
                    f"more samples per prompt than the schedule's {self.group}{rollout_n}: remake the schedule "
                    f"with --samples-per-prompt {n} ({what})")
        return (f"{many:,} prompt{'s have' if many != 1 else ' has'} more observed samples than a group holds ({self.group}): "
                f"the first {self.group} of each, in the file's order, are replayed (of a history of several epochs, "
                "the oldest); give one epoch's lengths to replay that one (or pick it with --lengths-epoch E)"
                + more_samples_fix(self.group, self.observed_each, self.epochs_within))

    def warnings(self, max_response_tokens: int) -> list[str]:
        """What about the observed lengths is legal but probably not what the user meant (worded as `asp report` and
        `asp schedule --history` word theirs: the option, and of how many ids)."""
        notes = []
        if self.unknown_ids and not self.prompts_observed:
            notes.append(f"none of the {self.unknown_ids:,} prompt ids of --lengths is in the schedule "
                         f"(e.g. {shown_id(self.unknown_examples[0])}), so every length is sampled around the predictions"
                         + (self.written_otherwise or "; check --lengths-id-key, or that the lengths are of this schedule's "
                            "prompts"))
        elif self.unknown_ids:
            one = self.unknown_ids == 1
            notes.append(f"{self.unknown_ids:,} of the {max(self.observed_ids, self.unknown_ids):,} prompt ids of "
                         f"--lengths {'is' if one else 'are'} not in the schedule ({'' if one else 'e.g. '}"
                         f"{shown_id(self.unknown_examples[0])}); {'its' if one else 'their'} samples are ignored"
                         + self.written_otherwise)
        if self.prompts_over_group:
            notes.append(self.over_group_warning())
        if self.samples_over_cap:
            notes.append(f"{self.samples_over_cap:,} observed sample{'s are' if self.samples_over_cap != 1 else ' is'} "
                         "longer than the schedule's "
                         f"max_response_tokens ({max_response_tokens:,}); replayed as observed, though a server "
                         f"with that cap would stop {'them' if self.samples_over_cap != 1 else 'it'} there")
        return notes


def refuse_unmatched(observed, schedule_ids, paths) -> None:
    """Stop (exit 3) where none of the observed lengths' ids (``observed``: a frame with ``prompt_id``) is among the
    schedule's (``schedule_ids``): every length would be sampled around the predictions, and a pipeline reading
    `asp simulate --lengths ... -q` got the predictions' figures as its log's (a hostile-input audit, 2026-12-05;
    `asp predictor eval` and `asp observe` refused the same already)."""
    import polars as pl

    if observed is None or not observed.height:
        return
    ids = observed["prompt_id"].unique(maintain_order=True)
    if ids.is_in(pl.Series(schedule_ids).unique().implode()).any():
        return
    names = ", ".join(str(p) for p in paths) or "--lengths"
    near = near_misses(ids, pl.Series(schedule_ids))
    raise InputError(f"{names}: none of its {ids.len():,} prompt ids is in the schedule (e.g. {shown_id(ids[0])})"
                     + (near.clause("in --lengths", "in the schedule") if near else
                        "; name the id column with --lengths-id-key, or give the lengths of this schedule's prompts"))


def without_probe_samples(observed):
    """``observed`` (a frame with ``prompt_id`` and ``epoch``) without the samples that have no epoch (a probe's,
    observed before training: docs/probe.md) of the prompts it holds an epoch's samples of, and how many prompts' were
    left out. A probe's sample, of the policy before training and often at another cap, stood first in such a
    history and was replayed as the first of the prompt's group, beside N - 1 of epoch 0's (a known gap, closed
    2026-12-07); a prompt probed but in no epoch keeps its probe samples, better than the predictions."""
    import polars as pl

    if observed is None or "epoch" not in observed.columns:
        return observed, 0
    missing = observed["epoch"].null_count()
    if missing in (0, observed.height):
        return observed, 0
    in_epochs = observed.filter(pl.col("epoch").is_not_null())["prompt_id"].unique().implode()
    probe = pl.col("epoch").is_null() & pl.col("prompt_id").is_in(in_epochs)
    left_out = observed.filter(probe)["prompt_id"].n_unique()
    return (observed.filter(~probe), left_out) if left_out else (observed, 0)


def in_replay_order(observed):
    """``observed`` as a replay takes its first N samples of each prompt: `without_probe_samples`, and each prompt's
    samples oldest epoch first (in the files' order within an epoch; the prompts in the order they first appear),
    and the prompts whose probe samples were left out. Epochs given out of order (`--lengths e1.jsonl --lengths
    e0.jsonl`) replayed the later one's, where the warning said the oldest's (a hostile-input round, 2026-12-07)."""
    import polars as pl

    observed, left_out = without_probe_samples(observed)
    if observed is None or "epoch" not in observed.columns or observed["epoch"].null_count() == observed.height:
        return observed, left_out
    return observed.sort([pl.int_range(pl.len()).min().over("prompt_id"), pl.col("epoch").fill_null(-1)],
                         maintain_order=True), left_out


def epochs_words(epochs: list[int]) -> str:
    """0 and 1; 0, 1 and 3; 0 to 9 (a run of more than three)."""
    if len(epochs) > 3 and epochs[-1] - epochs[0] == len(epochs) - 1:
        return f"epochs {epochs[0]} to {epochs[-1]}"
    if len(epochs) > 8:
        epochs = epochs[:6] + ["..."] + epochs[-1:]  # type: ignore[list-item]
    words = [str(e) for e in epochs]
    return ("epoch " if len(words) == 1 else "epochs ") + (
        words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1])


def epoch_samples(observed, epoch: int | None, paths=()):
    """The samples of ``observed`` (as `asp_cli.reading.read_lengths` returns them) of one ``epoch``
    (`ReplayOptions.lengths_epoch`, `asp simulate` and `asp replay --lengths-epoch`; -1: those without an epoch, a
    probe's); all of
    them where ``epoch`` is None. ``paths``: the files they were read from, named in the errors.

    Raises
    ------
    SettingsError
        ``epoch`` given without lengths, or one the lengths do not hold (the message names those they do).
    """
    import polars as pl

    if epoch is None:
        return observed
    if observed is None:
        raise SettingsError("--lengths-epoch picks an epoch of the --lengths files: give --lengths too, or leave it out")
    names = ", ".join(str(p) for p in paths) or "--lengths"
    column = observed["epoch"] if "epoch" in observed.columns else pl.Series("epoch", [None] * observed.height)
    held = sorted(int(e) for e in column.drop_nulls().unique().to_list())
    probe = column.null_count() > 0
    if epoch in held or (epoch == -1 and probe):
        if "epoch" not in observed.columns:  # kept, so that the replay's warnings say they are a probe's
            observed = observed.with_columns(column.cast(pl.Int32))
        return observed.filter(column.fill_null(-1) == epoch)
    if not held:
        raise SettingsError(f"--lengths-epoch {epoch}: no sample of {names} says its epoch; observe each epoch's log "
                            "with --epoch E (asp observe), or leave --lengths-epoch out")
    raise SettingsError(f"--lengths-epoch {epoch}: {names} hold{'s' if len(paths) <= 1 else ''} {epochs_words(held)}"
                        + (", and samples without an epoch (a probe's: --lengths-epoch -1)" if probe else "")
                        + "; give one of those, or leave --lengths-epoch out")


def lengths_for_schedule(
    frame,  # pl.DataFrame: the schedule rows in seq order
    observed=None,  # pl.DataFrame | None: prompt_id, response_tokens (one row per sample, file order)
    *,
    samples_per_prompt: int,
    seed: int = 0,
    max_response_tokens: int = 1 << 30,
    per_epoch: bool = True,
) -> tuple[np.ndarray, LengthInfo]:
    """True lengths per schedule row: observed where given, otherwise the noise model.

    A prompt with at least N observed samples uses its first N, oldest epoch first (its samples without an epoch, a
    probe's, left out where it has an epoch's: `in_replay_order`); one with fewer keeps them and gets the rest
    drawn around them (`complete_groups`, deterministically from ``seed``; the spread pooled per
    ``data_source`` where the schedule has one); a prompt absent from ``observed`` is sampled around its
    prediction. Each epoch of a schedule of several replays the lengths' own epoch of its number first where they
    hold it (`_replay_segments`), unless ``per_epoch`` is False: ``observed`` is one epoch picked for them all
    (`asp simulate --lengths-epoch E`, which was said as "schedule epoch E replayed the lengths' own; the others,
    which the lengths do not number, ...").
    """
    import polars as pl

    observed, probe_left_out = in_replay_order(observed)
    schedule_epochs, matched = matched_epochs(frame, observed) if per_epoch else ([], [])
    n = samples_per_prompt
    ids = frame["prompt_id"]
    keys = ids.cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    rows = frame.height
    out = np.zeros((rows, n), dtype=np.int64)
    have = np.zeros(rows, dtype=bool)
    drawn_prompts = 0
    own = np.zeros(rows, dtype=bool)
    numbered = np.zeros(rows, dtype=bool)
    count = np.zeros(rows, dtype=np.int64)
    over_cap = 0
    unknown: list[str] = []
    unknown_count = observed_ids = 0
    written_otherwise = ""
    if observed is not None and observed.height:
        strays = observed["prompt_id"].unique(maintain_order=True)
        observed_ids = strays.len()
        strays = strays.filter(~strays.is_in(ids.unique().implode()))
        unknown_count, unknown = strays.len(), strays.head(3).to_list()
        near = near_misses(strays, ids) if unknown_count else None
        written_otherwise = near.clause("in --lengths", "in the schedule") if near else ""
        flat, offset, count, own, own_count, numbered, source = _replay_segments(frame, observed, matched)
        have = count > 0
        pool = None
        if "data_source" in frame.columns:
            pool = frame["data_source"].cast(pl.String).fill_null("").cast(pl.Categorical).to_physical()
            pool = pool.to_numpy().astype(np.int64)
        # A stream of its own: the noise model below draws from `default_rng(seed)`, and sharing it would tie
        # the unobserved prompts' factors to the observed prompts' drawn samples.
        out = complete_groups(flat, offset, count, n, np.random.default_rng([seed, 1]), pool=pool,
                              max_response_tokens=max_response_tokens)
        drawn_prompts = int(ids.filter(pl.Series(have & (count < n))).n_unique())
        # Each observed sample over the cap once: a one-epoch log on a 3-epoch schedule replays it in every epoch,
        # and was counted three times (a hostile review, 2026-12-07). Drawn ones are clipped to the cap.
        real = (np.arange(n)[None, :] < count[:, None]) & (out > max_response_tokens)
        over_cap = int(np.unique(source[(offset[:, None] + np.arange(n)[None, :])[real]]).size)
    if not have.all():
        col = "predicted_mean_tokens" if "predicted_mean_tokens" in frame.columns else "predicted_tokens"
        mean = frame[col].fill_null(1).to_numpy()
        drawn = sample_lengths(mean, keys, n, seed=seed, max_response_tokens=max_response_tokens)
        out[~have] = drawn[~have]
    # A row replayed from its own epoch's samples is over the group where that epoch holds more than N of the
    # prompt: its other epochs' samples stand behind them only to complete a group of fewer.
    judged = np.where(own, own_count, count) if own.any() else count
    over_group = int(ids.filter(pl.Series(judged > n)).n_unique()) if observed is not None and observed.height else 0
    seen = np.unique(judged[have]) if over_group else np.zeros(0, dtype=np.int64)
    observed_each = int(seen[0]) if seen.size == 1 else 0
    # The epochs of the prompts over the group alone: a probe's 8 samples of prompts no epoch holds, beside another
    # half's epoch 0, were said as "a history of several epochs" and told to pick one with --lengths-epoch.
    over_ids = ids.filter(pl.Series(judged > n)).unique().implode() if over_group else None
    epochs = observed.filter(pl.col("prompt_id").is_in(over_ids))["epoch"] \
        if over_group and "epoch" in observed.columns else None
    one_epoch = (int(epochs[0]) if over_group and epochs is not None and not epochs.null_count()
                 and epochs.n_unique() == 1 else -1 if over_group and epochs is not None
                 and epochs.null_count() == epochs.len() else None)
    # Every row over the group over it in its own epoch's samples: those epochs are what holds too many, not every
    # epoch of the prompts (all of them, said as "a history of several epochs, the oldest" replayed).
    over_rows = judged > n
    own_over = sorted({int(e) for e in frame["epoch"].to_numpy()[over_rows & own]}) \
        if over_group and own.any() and not (over_rows & ~own).any() else []
    one_epoch = (own_over[0] if len(own_over) == 1 else None) if own_over else one_epoch
    observed_prompts = int(ids.filter(pl.Series(have)).n_unique())
    sampled_prompts = int(ids.filter(pl.Series(~have)).n_unique())
    return np.maximum(out, 1), LengthInfo(observed_prompts, sampled_prompts, drawn_prompts, unknown_count,
                                          tuple(unknown), over_cap, observed_ids, written_otherwise, over_group, n,
                                          observed_each, one_epoch, probe_left_out,
                                          # of the prompts over the group alone, as `one_epoch` (a probe of others
                                          # hid that each epoch held a group, and rollout.n was blamed)
                                          epochs_within(observed.filter(pl.col("prompt_id").is_in(over_ids)), n)
                                          if over_group else 0,
                                          _epochs_replayed(frame, schedule_epochs, matched, have & ~own & numbered),
                                          own_epochs_over=tuple(own_over))


def matched_epochs(frame, observed) -> tuple[list[int], list[int]]:
    """(the schedule's epochs, those of them the lengths number) where the schedule holds several epochs and some
    observed sample names its epoch; ([], []) otherwise (a schedule of one epoch replays as it always did). `asp
    report --lengths` compares the epochs a replay matches so (`asp_cli.report.observed.observed_by_epoch`)."""
    if (observed is None or not observed.height or "epoch" not in frame.columns or "epoch" not in observed.columns
            or observed["epoch"].null_count() == observed.height):
        return [], []
    schedule_epochs = sorted(int(e) for e in frame["epoch"].unique().to_list())
    if len(schedule_epochs) < 2:
        return [], []
    held = {int(e) for e in observed["epoch"].drop_nulls().unique().to_list()}
    return schedule_epochs, [e for e in schedule_epochs if e in held]


def _replay_segments(frame, observed, matched: list[int]):
    """Every schedule row's observed samples, back to back as `complete_groups` takes them: (``flat``, ``offset``,
    ``count``, ``own``, ``own_count``: its own epoch's samples, ``numbered``: its prompt has a sample of some
    epoch, not a probe's alone, which `_epochs_replayed` does not count as other epochs', ``source``: each element
    of ``flat``'s sample, its index in the first layout, so that a sample replayed in several epochs counts once). A
    row of an epoch in ``matched`` (`matched_epochs`) whose prompt the lengths hold samples of in that epoch takes
    those first, then the prompt's
    others in replay order (``own`` True); every other row takes the prompt's samples in replay order, oldest epoch
    first. A 3-epoch schedule replayed with a 3-epoch history replayed the oldest epoch's samples in all three (a
    review's, 2026-12-07). Each matched epoch's layout is the prompts' samples in replay order, each prompt's
    reordered in place (a stable sort, own epoch first): the same samples, so a group's spread is the prompt's, and
    NumPy's sort, not a Polars window and join over a copy of the samples per epoch (a 100k-prompt, 3-epoch replay
    took a third longer and three times the memory, a hostile review's)."""
    import polars as pl

    epoch = pl.col("epoch").fill_null(-1) if "epoch" in observed.columns else pl.lit(-1)
    obs = observed.select("prompt_id", "response_tokens", epoch.cast(pl.Int64).alias("epoch")).with_columns(
        pl.int_range(0, pl.len()).over("prompt_id").alias("k"))
    counts = obs.group_by("prompt_id", maintain_order=True).agg(pl.len().alias("count"))
    counts = counts.with_columns((pl.col("count").cum_sum() - pl.col("count")).alias("offset")).with_row_index("segment")
    laid = obs.join(counts, on="prompt_id", how="left").sort(["offset", "k"])
    flat = laid["response_tokens"].to_numpy()
    joined = frame.select("prompt_id").join(counts, on="prompt_id", how="left", maintain_order="left")
    count = joined["count"].fill_null(0).to_numpy().astype(np.int64)
    offset = joined["offset"].fill_null(0).to_numpy().astype(np.int64)
    own = np.zeros(frame.height, dtype=bool)
    own_count = np.zeros(frame.height, dtype=np.int64)
    if not matched:
        return flat, offset, count, own, own_count, count > 0, np.arange(flat.size)
    sample_epochs = laid["epoch"].to_numpy()
    sample_segment = np.repeat(np.arange(counts.height, dtype=np.int64), counts["count"].to_numpy())
    row_segment = joined["segment"].fill_null(0).to_numpy().astype(np.int64)
    numbered = (count > 0) & (np.bincount(sample_segment, weights=sample_epochs != -1,
                                          minlength=counts.height)[row_segment] > 0)
    row_epochs = frame["epoch"].cast(pl.Int64).to_numpy()
    parts, sources = [flat], [np.arange(flat.size)]
    for i, e in enumerate(matched):
        mine = sample_epochs == e
        held = np.bincount(sample_segment, weights=mine, minlength=counts.height).astype(np.int64)
        sources.append(np.argsort(2 * sample_segment + ~mine, kind="stable"))
        parts.append(flat[sources[-1]])
        rows = (row_epochs == e) & (count > 0) & (held[row_segment] > 0)
        own |= rows
        own_count[rows] = held[row_segment[rows]]
        offset[rows] += (i + 1) * flat.size
    return np.concatenate(parts), offset, count, own, own_count, numbered, np.concatenate(sources)


def _epochs_replayed(frame, schedule_epochs: list[int], matched: list[int],
                     from_others: np.ndarray) -> tuple[tuple[int, int | None, int], ...]:
    """Per schedule epoch (`matched_epochs`): the lengths' epoch it replayed (itself, where the lengths number it;
    None where each prompt replayed its first N samples, oldest epoch first), and how many of its prompts the lengths
    hold no sample of in that epoch, which replayed their other epochs' samples (``from_others``: per row)."""
    if not schedule_epochs:
        return ()
    epochs = frame["epoch"].to_numpy()
    return tuple((e, e if e in matched else None, int(np.sum(from_others[epochs == e])) if e in matched else 0)
                 for e in schedule_epochs)
