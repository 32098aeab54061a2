"""How to read user files: which columns hold what, and what to do with a bad row. Validated once, here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from asp_cli.errors import SettingsError

OnBadRow = Literal["error", "skip"]
ON_BAD_ROW: tuple[str, ...] = ("error", "skip")


@dataclass(frozen=True)
class ReadOptions:
    """The reading options every command that reads prompt or length files takes.

    ``prompt_key`` and ``id_key`` override the prompt and id columns of prompt files, ``source_key`` their data
    source column (a dotted path reaches into an object: ``metadata.task``) and ``difficulty_key`` their difficulty; ``length_id_key`` and
    ``length_key`` the id and length columns of length files (history, observed lengths), which the calling
    command names ``length_id_flag`` and ``length_flag`` in its messages (and ``id_key`` as ``id_flag``,
    ``prompt_key`` as ``prompt_flag``).
    ``on_bad_row="skip"`` skips malformed rows and counts them; ``tokenizer`` is a local Hugging Face ``tokenizer.json`` for prompt tokens.

    Raises
    ------
    SettingsError
        An unknown ``on_bad_row``, or a key that is not text.
    """

    prompt_key: str | None = None
    id_key: str | None = None
    source_key: str | None = None
    difficulty_key: str | None = None
    length_id_key: str | None = None
    length_key: str | None = None
    on_bad_row: OnBadRow = "error"
    tokenizer: Path | None = None
    length_id_flag: str = "--history-id-key"
    length_flag: str = "--history-length-key"
    id_flag: str = "--id-key"  # how the calling command names ``id_key`` (asp observe: --dataset-id-key)
    prompt_flag: str = "--prompt-key"  # and ``prompt_key`` (asp observe: --dataset-prompt-key)

    def __post_init__(self) -> None:
        if not isinstance(self.on_bad_row, str) or self.on_bad_row not in ON_BAD_ROW:
            raise SettingsError(f"--on-bad-row must be 'error' or 'skip' (got {self.on_bad_row!r})")
        # Named as the calling command names them: `asp schedule --history-id-key ''` was refused as
        # "--length-id-key", an option no command has.
        for value, flag in ((self.prompt_key, self.prompt_flag), (self.id_key, self.id_flag),
                            (self.source_key, "--source-key"), (self.difficulty_key, "--difficulty-key"),
                            (self.length_id_key, self.length_id_flag), (self.length_key, self.length_flag)):
            if value is not None and (not isinstance(value, str) or not value):
                raise SettingsError(f"{flag} must name a column (got {value!r})")
        if self.tokenizer is not None and not isinstance(self.tokenizer, Path):  # 5 was a TypeError from Path()
            object.__setattr__(self, "tokenizer", one_path(self.tokenizer, "tokenizer"))

    def named_as(self, command: ReadOptions) -> ReadOptions:
        """These options with the flag names of ``command``'s (its default `ReadOptions`): a Python user's own
        `ReadOptions()` made `observe` name its log's id column "--history-id-key", an option it has not (a library
        newcomer's round)."""
        flags = ("length_id_flag", "length_flag", "id_flag", "prompt_flag")
        if not isinstance(self, ReadOptions):
            raise SettingsError(f"read must be a ReadOptions (asp_cli.ReadOptions(...)), not {type(self).__name__}")
        return dataclasses.replace(self, **{f: getattr(command, f) for f in flags})

    def check_length_keys_used(self, files: Sequence[object], files_flag: str) -> None:
        """Refuse the length files' column options when no length file is given (``files_flag`` names them):
        they did nothing, silently (`asp schedule --history-id-key uid` without --history made a schedule without
        the history, exit 0), where `asp observe --dataset-id-key` without --dataset is refused.

        Raises
        ------
        SettingsError
            Naming the option and what it needs.
        """
        if files:
            return
        for value, flag in ((self.length_id_key, self.length_id_flag), (self.length_key, self.length_flag)):
            if value is not None:
                raise SettingsError(f"{flag} names a column of the {files_flag} files, but none is given; give them "
                                    f"with {files_flag}, or drop {flag}")

    @property
    def skip_bad_rows(self) -> bool:
        return self.on_bad_row == "skip"

    @property
    def text_keys(self) -> tuple[str, ...]:
        """The columns named by these options that hold ids or prompts: a CSV reader reads them as text."""
        return tuple(k for k in (self.prompt_key, self.id_key, self.length_id_key) if k is not None)


DEFAULT_READ = ReadOptions()


def paths_of(value: str | Path | Iterable[str | Path] | None) -> list[Path]:
    """The files a twin's argument names: one path (text or a `Path`) or an ordered collection of them (a list, a
    tuple, a generator such as ``sorted(folder.glob("*.jsonl"))`` or ``folder.glob(...)``). A Python user's
    `schedule("p.jsonl")` was read as the files "p", ".", "j"... ("s: unknown file type"), and `schedule(Path(...))`
    was a TypeError.

    Raises
    ------
    SettingsError
        A value that is neither: a number, a mapping, a frame or a list of rows (asp reads files), a set (its order
        changes from run to run), a collection holding something other than paths.
    """
    import os

    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [Path(value)]
    if hasattr(value, "write_parquet") or hasattr(value, "to_parquet"):  # a Polars or pandas frame
        # Prompts, a history or lengths alike: "prompt files ... 'prompts.parquet'" misled a history's newcomer.
        raise SettingsError(f"expected a path or a list of paths, got a {type(value).__name__}; asp reads files: "
                            "write the frame to one first (frame.write_parquet(PATH), pandas' to_parquet) and pass "
                            "its path")
    if dataclasses.is_dataclass(value) and hasattr(value, "output"):  # a twin's result (observe's), not its file
        name = type(value).__name__
        raise SettingsError(f"expected a path or a list of paths, got {'an' if name[0] in 'AEIOU' else 'a'} {name} (a "
                            "result kept in memory); asp reads files: give the file it wrote (made with an output "
                            "path; its .output names it)")
    if dataclasses.is_dataclass(value):  # settings where files go: simulate_file(s, ReplayOptions()) showed its repr
        raise SettingsError(f"expected a path or a list of paths, got a {type(value).__name__}: settings go by keyword "
                            "(options=..., settings=..., read=...)")
    if isinstance(value, (set, frozenset)):  # the files' order is the rows' order, and a set's is the hash seed's
        raise SettingsError(f"expected a path or a list of paths, got a {type(value).__name__}, whose order changes "
                            "from run to run (and would change the schedule): pass a list, e.g. sorted(paths)")
    items = value
    if not isinstance(value, (bytes, Mapping)) and isinstance(value, Iterable):
        items = list(value)  # a generator too (a newcomer's folder.glob("*.jsonl") was refused), read once
        if all(isinstance(p, (str, os.PathLike)) for p in items):
            return [Path(p) for p in items]
        if items and all(isinstance(p, Mapping) for p in items):  # rows built in Python: said what to do
            raise SettingsError(f"expected a path or a list of paths, got a {type(value).__name__} of {len(items):,} "
                                f"row{'s' if len(items) > 1 else ''}; asp reads files: write the rows to one first (a JSONL file, one "
                                "json.dumps(row) a line) and pass its path")
    shown = str(items).replace("\n", " ")  # one line, whatever its repr
    raise SettingsError(f"expected a path or a list of paths, got {type(value).__name__} "
                        f"{shown[:60] + ('...' if len(shown) > 60 else '')!r}")


def one_path(value: object, what: str) -> Path:
    """The one file a twin's argument ``what`` names (text or a `Path`); a Python user's None or number was a
    TypeError from `Path` (a hostile-input round)."""
    import os

    if not isinstance(value, (str, os.PathLike)):
        raise SettingsError(f"{what} must be a path (text or a pathlib.Path), got {type(value).__name__} "
                            f"{str(value)[:60]!r}")
    return Path(value)
