"""asp_cli.integrate.prompt_match: the refusal of a dump whose inputs match no dataset prompt, worded for its counts."""

from __future__ import annotations

import pytest

from asp_cli.integrate.prompt_match import no_prompt_matched


@pytest.mark.parametrize("unmatched, rows, prompts, words", [
    # counts of one read "no row of its 1 matches any of the 1 prompts", "1 of its 5 rows match none of the 1 prompts"
    (1, 1, 1, "its one row does not match the prompt of d.jsonl: not the file the run read?"),
    (1, 1, 2, "its one row does not match any of the 2 prompts of d.jsonl: not the file the run read?"),
    (3, 3, 1, "no row of its 3 matches the prompt of d.jsonl: not the file the run read?"),
    (1, 5, 2, "1 of its 5 rows does not match any of the 2 prompts of d.jsonl: prompts edited or removed since"),
    (2, 5, 1, "2 of its 5 rows do not match the prompt of d.jsonl: prompts edited or removed since"),
    # as docs/errors.md (E140) quotes them
    (64, 64, 64, "no row of its 64 matches any of the 64 prompts of d.jsonl: not the file the run read?"),
    (12, 64, 64, "12 of its 64 rows match none of the 64 prompts of d.jsonl: prompts edited or removed since"),
])
def test_the_counts_of_a_dump_that_matches_no_prompt_are_worded_for_one_and_many(unmatched, rows, prompts, words):
    said = no_prompt_matched("x.jsonl:1: its input matches no dataset prompt", unmatched, rows, prompts, ["d.jsonl"])
    assert said.startswith(f"x.jsonl:1: its input matches no dataset prompt ({words}"), said
