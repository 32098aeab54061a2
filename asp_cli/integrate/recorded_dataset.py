"""The prompt files a schedule was made from, found again for `asp observe --schedule` of a text log.

A log of prompt and response text (OpenRLHF's or slime's `{"input", "output"}` length log, verl's rollout dumps)
is matched to the prompts by text, which needs the prompt files. The schedule records the name and fingerprint of
each file it was made from (metadata ``inputs``) and the paths it was given (``columns_used``): a file found at one
of those paths, beside the schedule, or here under that name, with those bytes, is that file (an OpenRLHF
newcomer's `asp observe asp_lengths.jsonl --schedule schedule.parquet` was asked for `--dataset` without a word of
which file).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from asp_cli.errors import InputError


def recorded_inputs(schedule: Path | None, metadata: dict[str, Any]) -> tuple[list[Path] | None, list[str]]:
    """The files the schedule (its file ``schedule``, None for one kept in memory) was made from, each found with its
    recorded fingerprint (None where any is not), and their recorded names (empty where the schedule records none)."""
    from asp_cli.fingerprint import file_fingerprint

    inputs = metadata.get("inputs")
    entries = [e for e in inputs if isinstance(e, dict)] if isinstance(inputs, list) else []
    names = [str(e.get("name")) for e in entries if isinstance(e.get("name"), str)]
    if not entries or len(names) != len(entries):
        return None, names
    used = metadata.get("columns_used")
    given = [Path(p) for p in used if isinstance(p, str)] if isinstance(used, dict) else []
    found: list[Path] = []
    for entry in entries:
        name = entry["name"]
        places = [p for p in given if p.name == name] + [*([schedule.parent / name] if schedule else []), Path(name)]
        for place in dict.fromkeys(places):  # each place once, in that order
            try:
                if place.is_file() and file_fingerprint(place) == entry.get("fingerprint"):
                    found.append(place)
                    break
            except (OSError, InputError):  # unreadable: not the file
                continue
        else:
            return None, names
    return found, names


class DatasetFromSchedule:
    """Called with a text log's path where it needs the prompt files and none were given: the files the schedule
    was made from, read once by ``read`` (``used`` then holds their paths), or an error naming them (E103)."""

    def __init__(self, schedule: Path | None, metadata: dict[str, Any], read: Callable[[list[Path]], Any]) -> None:
        self.schedule, self.metadata, self.read = schedule, metadata, read
        self.used: list[Path] = []
        self._dataset: Any = None

    def __call__(self, log: Path) -> Any:
        if self._dataset is None:
            found, names = recorded_inputs(self.schedule, self.metadata)
            if found is None:
                given = (f"the schedule was made from {', '.join(names)}, not found beside it or here with the bytes "
                         f"it recorded: pass --dataset {' --dataset '.join(names)} (where each is now)" if names else
                         "pass --dataset with the prompt file(s) the rollouts read")
                raise InputError(f"{log}: input/output text without prompt ids (verl's rollout dump, OpenRLHF's or "
                                 f"slime's length log); {given}, so asp can match inputs to prompts, or log prompt ids "
                                 "and token counts instead")
            self._dataset, self.used = self.read(found), found
        return self._dataset
