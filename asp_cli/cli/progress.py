"""Progress of long commands on stderr: a live line on a terminal, or one plain line per stage when asked.

A command shows progress when stderr is a terminal (unless ``--quiet``), or anywhere with ``--progress``
(CI logs, ``2> log``), where a redrawn bar would fill the file with carriage returns. stdout never sees it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO


class StageBar:
    """Named stages of one command, numbered when the command knows them all up front.

    ``step(stage)`` announces that ``stage`` starts: ``asp schedule: 3/5 predicting lengths``.
    """

    def __init__(self, command: str, stages: Sequence[str] = (), *, live: bool, file: TextIO | None = None) -> None:
        self._command = command
        self._stages = tuple(stages)
        self._file = file if file is not None else sys.stderr
        self._bar = None
        if live:
            from tqdm import tqdm

            # The whole line is the description: tqdm's postfix would put ", " before the stage.
            # Stages are few and slow: draw every one (tqdm would skip those within its minimum interval).
            self._bar = tqdm(total=len(self._stages) or None, file=self._file, leave=False, mininterval=0,
                             miniters=1, bar_format="{desc} [{elapsed}]", desc=command)

    def line(self, stage: str) -> str:
        """What ``step(stage)`` shows."""
        if stage in self._stages:
            return f"{self._command}: {self._stages.index(stage) + 1}/{len(self._stages)} {stage}"
        return f"{self._command}: {stage}"

    def step(self, stage: str) -> None:
        text = self.line(stage)
        if self._bar is None:
            print(text, file=self._file, flush=True)
        else:
            self._bar.set_description_str(text, refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def stage_bar(command: str, stages: Sequence[str] = (), *, quiet: bool, progress: bool) -> StageBar | None:
    """A `StageBar` when progress is wanted: ``progress`` (``--progress``) always, a terminal unless ``quiet``."""
    terminal = sys.stderr.isatty()
    if progress or (terminal and not quiet):
        return StageBar(command, stages, live=terminal)
    return None
