"""Matching a verl generation dump's ``input`` text (a prompt rendered through a chat template and decoded) to the
dataset prompt it holds: `asp observe --dataset` on dumps that carry no prompt id."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Text a chat template may put right before a message's content; where matching a dump's input starts.
_CONTENT_START = re.compile(r"(?:^|[\n>:])[ \t\n]*")
_WORD_START = re.compile(r" ")
_WHITESPACE = re.compile(r"\s+")
_MATCH_KEY_CHARS = 48


class PromptMatcher:
    """Finds the dataset prompt whose text a dump's ``input`` contains, where a message's content may start.

    First exactly, at the start or after a newline, ``>`` or ``:`` (where chat templates put content; verl
    decodes the prompt with ``skip_special_tokens=True``, which leaves the role words and newlines); then, for
    decoders that change whitespace (word-level ones join tokens by single spaces), with whitespace runs
    collapsed on both sides, at any word start. The longest match wins. Samples of a prompt text that several
    ids share are spread over those ids in turn, in dataset order: the same text, the same policy's lengths (all
    went to the first id, the others left without a sample: an OpenRLHF newcomer's 300 repeated prompts). Each
    distinct input is matched once (the n samples of a group share it).
    """

    def __init__(self, contents: list[tuple[str, str]]) -> None:
        self._exact = _Index(contents)
        self._loose = _Index([(_WHITESPACE.sub(" ", text), prompt_id) for text, prompt_id in contents])
        self._seen: dict[str, tuple[str, ...]] = {}
        self._turn: dict[tuple[str, ...], int] = {}  # each shared text's next id

    def match(self, text: str) -> str | None:
        if text not in self._seen:
            found = self._exact.find(text, _CONTENT_START.finditer(text))
            if found is None:
                loose = _WHITESPACE.sub(" ", text)
                found = self._loose.find(loose, _WORD_START.finditer(loose))
            self._seen[text] = found or ()
        ids = self._seen[text]
        if len(ids) < 2:
            return ids[0] if ids else None
        turn = self._turn.get(ids, 0)
        self._turn[ids] = turn + 1
        return ids[turn % len(ids)]

    def shared_ids(self) -> list[tuple[str, ...]]:
        """The ids of each prompt text several ids share that samples were spread over so far."""
        return list(self._turn)

    def ambiguous(self, text: str) -> bool:
        """Whether the text's match was a prompt text that several ids share."""
        return len(self._seen.get(text, ())) > 1


class _Index:
    """Prompt texts keyed by their first `_MATCH_KEY_CHARS` characters (the whole text when shorter)."""

    def __init__(self, contents: list[tuple[str, str]]) -> None:
        self.by_key: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        ids: dict[str, list[str]] = {}  # each text's ids, in dataset order
        for content, prompt_id in contents:
            if content:
                ids.setdefault(content, []).append(prompt_id)
        for content, its in ids.items():
            self.by_key.setdefault(content[:_MATCH_KEY_CHARS], []).append((content, tuple(its)))
        # Prompts shorter than the key are looked up by each such length.
        self.short = sorted({len(c) for c, _ in contents if 0 < len(c) < _MATCH_KEY_CHARS})

    def find(self, text: str, starts: Iterable[re.Match[str]]) -> tuple[str, ...] | None:
        """The ids (several where prompts share the text) of the longest prompt found in ``text`` at 0 or a match's
        end."""
        best: tuple[int, tuple[str, ...]] | None = None
        for start in [0, *(m.end() for m in starts)]:
            keys = [text[start:start + _MATCH_KEY_CHARS], *(text[start:start + n] for n in self.short)]
            for key in keys:
                for content, ids in self.by_key.get(key, ()):
                    if text.startswith(content, start) and (best is None or len(content) > best[0]):
                        best = (len(content), ids)
        return best[1] if best else None


def no_prompt_matched(first: str, unmatched: int, rows: int, prompts: int, files: list) -> str:
    """The message for a dump whose ``first`` bad row's input matches no prompt of ``files``: how many of its rows
    match none, and the likely fix (the wrong --dataset where none does, prompts edited since where some do). A wrong
    file was told to 'fix the row' (a verl newcomer's round, 2026-12-07)."""
    named = ", ".join(str(f) for f in files)
    # Counts of one read "no row of its 1 matches any of the 1 prompts": worded for them.
    target = f"the prompt of {named}" if prompts == 1 else f"any of the {prompts:,} prompts of {named}"
    how = ((f"its one row does not match {target}" if rows == 1 else f"no row of its {rows:,} matches {target}")
           + ": not the file the run read?" if unmatched == rows else
           f"{unmatched:,} of its {rows:,} rows "
           + (f"match none of the {prompts:,} prompts of {named}" if unmatched > 1 and prompts > 1 else
              f"{'does' if unmatched == 1 else 'do'} not match {target}")
           + ": prompts edited or removed since the run?")
    return (f"{first} ({how}); give --dataset the prompt file(s) the run read (verl's data.train_files, as they were "
            "when it ran), or pass --on-bad-row skip to leave such rows out (counted)")
