"""Ids that name the same prompt but are written another way: where lengths (a history, a log, `--lengths`) match
no prompt by id, say which would match, and how they differ.

asp matches ids exactly, as text (`reading.prompts.id_column`: a JSON number without a fraction reads as its
integer, 3.0 as "3"). Two ways of writing one id escape that and left a history's lengths unused with only a
count said (a hostile-input round, 2026-12-06): spaces around an id (`"q1 "`, as a CSV padded for reading
writes it, against `"q1"`), and a number written as text in one file and as a number in the other (a CSV's
`1.0`, text, against a JSON `1.0`, read as 1; or `007` against 7). asp does not rewrite either: `"q1 "` and
`"q1"` may be different prompts in someone's data, and a file's ids are what its schedule and exports carry. It
names the near misses instead, so the fix (the ids written alike in both files) is one step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asp_cli.errors import shown_id


@dataclass(frozen=True)
class NearMisses:
    """Unmatched ids that match a known id once written alike: how many, and one pair as an example."""

    count: int
    theirs: str  # an unmatched id, as the lengths write it
    ours: str  # the known id it matches, as the prompts (or schedule) write it
    how: str  # what differs: "spaces" or "number"

    def clause(self, where: str = "here", against: str = "among the prompts") -> str:
        """`` ; 20 of them differ from a prompt's id only in ...: write the ids alike in both files``."""
        kind = ("by spaces around it" if self.how == "spaces" else
                "as a number written another way (text in one file, a number in the other, or leading zeros)")
        of = "it differs" if self.count == 1 else f"{self.count:,} of them differ"
        return (f"; {of} from an id {against} only {kind}, e.g. {shown_id(self.theirs)} {where} and "
                f"{shown_id(self.ours)} {against}: write the ids alike in both files")


def near_misses(unmatched: Any, known: Any) -> NearMisses | None:
    """Of ``unmatched`` ids (a Polars Series of text), those equal to one of ``known`` (a Series, or any iterable
    of ids) once spaces around them are removed and a number's form is made plain; None where none is."""
    import polars as pl

    unmatched = _text(unmatched).drop_nulls().unique(maintain_order=True)
    if not unmatched.len():
        return None
    known = _text(known)
    mine = pl.DataFrame({"ours": known}).drop_nulls().unique(maintain_order=True)
    mine = mine.with_columns(_plain(pl.col("ours")).alias("form")).unique("form", keep="first", maintain_order=True)
    theirs = pl.DataFrame({"theirs": unmatched}).with_columns(_plain(pl.col("theirs")).alias("form"))
    found = theirs.join(mine, on="form", how="inner", maintain_order="left")
    if not found.height:
        return None
    first = found.row(0, named=True)
    spaces = first["theirs"].strip() == first["ours"].strip()
    if not spaces and _row_numbers(mine["ours"]):
        # Ids 0..n-1 are what a file without an id column is numbered by: "001" against 1 is then the first prompt's
        # id in another column against the second row, and "write them alike" would shift every length by one (a
        # review). The fix there is the id column (--id-key), which the callers say.
        return None
    return NearMisses(found.height, first["theirs"], first["ours"], "spaces" if spaces else "number")


def _text(ids: Any) -> Any:
    """Ids as a Polars Series of text, from a Series of any type or any iterable (a list of ints)."""
    import polars as pl

    series = ids if isinstance(ids, pl.Series) else pl.Series("prompt_id", list(ids))
    return series.cast(pl.String) if series.dtype != pl.String else series


def _row_numbers(ids: Any) -> bool:
    """Whether ``ids`` (distinct text) are exactly 0, 1, ..., n-1: row numbers, or ids that look like them."""
    import polars as pl

    plain = ids.filter(ids.str.contains(r"^(0|[1-9][0-9]{0,17})$"))
    return plain.len() == ids.len() and bool(plain.cast(pl.Int64).sort().equals(
        pl.Series(range(ids.len()), dtype=pl.Int64), check_names=False))


def _plain(col: Any) -> Any:
    """An id with the spaces around it removed and, where it is a whole number (``007``, ``1.0``, ``+3``), that
    number in its plain decimal form."""
    import polars as pl

    text = col.str.strip_chars()
    number = text.str.contains(r"^[+-]?[0-9]+(\.0*)?$")
    digits = text.str.replace(r"^\+", "").str.replace(r"\.0*$", "")
    sign = pl.when(digits.str.starts_with("-")).then(pl.lit("-")).otherwise(pl.lit(""))
    magnitude = digits.str.replace(r"^-", "").str.replace(r"^0+", "")
    magnitude = pl.when(magnitude == "").then(pl.lit("0")).otherwise(magnitude)
    plain = pl.when(magnitude == "0").then(pl.lit("0")).otherwise(pl.concat_str(sign, magnitude))
    return pl.when(number).then(plain).otherwise(text)
