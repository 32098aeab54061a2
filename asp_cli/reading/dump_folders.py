"""A folder given where a file goes, known as verl's ``trainer.rollout_data_dir``: what to run on it instead.

verl writes one ``{global_steps}.jsonl`` a step there (``_write_generations``, verl/trainer/ppo/ray_trainer.py:454
and verl/trainer/ppo/v1/trainer_base.py:1226, 0.9.1): input and output text, no prompt id or token count, which
`asp observe` turns into a history with the prompt file(s) the run read.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

_STEP_DUMP = re.compile(r"^\d+\.jsonl$")


def step_dumps(folder: str | Path) -> list[Path]:
    """The files of ``folder`` named as verl names its rollout dumps, in step order (a shell's glob sorts 10 before
    2); none where it cannot be listed."""
    try:
        found = [p for p in Path(folder).iterdir() if _STEP_DUMP.match(p.name) and p.is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: int(p.name.split(".")[0]))


def shell_path(path: str | Path) -> str:
    """``path`` as a shell reads it in a command asp says to run (quoted where it holds a space or a quote)."""
    return shlex.quote(str(path))


def dump_folder_fix(folder: str | Path, *, observing: bool = False, lengths: bool = False) -> str | None:
    """The message for ``folder`` given as a file where it holds verl rollout dumps (None where it holds none): to
    `asp observe`, name its files; where lengths are read (``lengths``: ``--history``, ``--lengths``), turn them into
    a history first; elsewhere (prompts, `asp observe --dataset`), give the prompt file(s) the run read, the dumps
    being its outputs (they were told to pass the history there, as lengths)."""
    dumps = step_dumps(folder)
    if not dumps:
        return None
    span = dumps[0].name if len(dumps) == 1 else f"{dumps[0].name} to {dumps[-1].name}"
    what = (f"{folder}: is a folder of {len(dumps)} verl rollout dump{'s' if len(dumps) > 1 else ''} ({span}, one "
            "a step, as trainer.rollout_data_dir holds them: input/output text, no prompt ids)")
    # Quoted for a shell, the glob outside the quotes: a folder named with a space gave a command that did not run.
    command = f"asp observe {shell_path(folder)}/*.jsonl --dataset PROMPTS -o history.parquet"
    if observing:
        return f"{what}; name its files, not the folder: {command} (PROMPTS: the file(s) the run read)"
    if lengths:
        return f"{what}; turn them into lengths first: {command}, then pass history.parquet"
    return (f"{what}: a run's outputs, not prompts; give the prompt file(s) the run read (verl's data.train_files), "
            f"and to feed the dumps back as lengths: {command}")
