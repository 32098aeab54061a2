"""Atomic output: write a temporary file beside the target, then publish it in one step.

A crash, Ctrl-C or SIGKILL at any moment leaves either the old file or the new one, never a partial one.
The temporary file is removed on any exception (KeyboardInterrupt included); only SIGKILL can leave one
behind, and its name (``.NAME.asp-tmp-*``) says what it is.

Publishing is where two runs writing one output meet, so it is one atomic step:

- without ``--force`` (``replace=False``) the finished file is hard-linked to the target name, which fails
  if the name exists: of two runs racing to a new path, one wins and the other reports that the output
  exists (exit 7) instead of both succeeding and one silently replacing the other. Where a file system
  cannot link, the name is claimed with an exclusive create just before the rename: the same outcome;
- with ``--force`` it is renamed over the target (the last run wins, as asked).

Read-modify-write outputs (``asp observe --append``) hold an exclusive `fcntl.flock` on a lock file beside
the target from before they read it until after they publish (`locked`), so two appenders run one after
the other and neither's rows are lost. A lock rather than a compare-and-swap: POSIX has no atomic "replace
if unchanged", and a check followed by a rename leaves a window; the kernel releases a flock when its
holder dies, even by SIGKILL, so a crash never leaves a stale lock.

Every failure of writing (an OSError with or without an errno, Polars' and PyArrow's IO errors, a full
stdout) becomes an `OutputError`: exit 7 with the path, whatever raised it.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from asp_cli import testhooks
from asp_cli.errors import OutputError, SettingsError

TMP_MARKER = ".asp-tmp-"
LOCK_MARKER = ".asp-lock"
PARQUET_SUFFIXES = (".parquet", ".pq")

_LOCK_POLL_S = 0.02
_live: set[Path] = set()  # temporary files being written now, removed if the process is forced to exit
_published: list[Path] = []  # outputs this command put in place


def json_finite(value: Any) -> Any:
    """``value`` (a JSON document: dicts, lists, scalars) with NaN and infinities as None, which JSON has no value
    for: what asp writes as JSON from records a user can edit (a schedule's metadata, a model card) or from
    figures that can be infinite."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_finite(v) for v in value]
    return value


def check_parquet_name(output: Path, *, writer: str, other: str = "", kind: bytes | None = None,
                       replacing: bool = True, writes: str | None = None) -> None:
    """Refuse a Parquet output whose name says another format (docs/errors.md E34), for every command, and an
    existing one of another asp kind (E85).

    A Parquet file named ``.csv`` or ``.jsonl`` is misread by whoever trusts the name, and asp's own readers
    refuse it later (E09). ``writer`` names what writes Parquet (``asp schedule``, ``--format verl``);
    ``other`` adds another way out (" or pass --format jsonl"). ``kind`` is the metadata key of what it writes
    (`ASP_KINDS`; None: predictions, which carry none): ``--force`` does not replace a file another asp command
    wrote (a hostile-input round: a schedule's ``-o`` over an accumulated history, exit 0). ``replacing``: whether
    an existing output would be replaced (without ``--force``, its own error says so first); ``writes``, what it
    writes where that is no asp kind (default `ASP_KINDS`' words for ``kind``).
    """
    _refuse_folder_name(output)
    suffix = Path(output).suffix
    if suffix.lower() not in PARQUET_SUFFIXES:
        raise SettingsError(f"{output}: {writer} writes Parquet, but {_name_problem(Path(output))}; "
                            f"{_name_fix(Path(output), '.parquet')}{other}")
    existing = _asp_kind(Path(output)) if replacing else None
    if existing is not None and existing != kind:
        raise OutputError(f"{output} is {ASP_KINDS.get(existing, 'an asp file')}, and {writer} writes "
                          f"{writes or ASP_KINDS[kind]}: --force replaces only a file of its own kind; name another "
                          "output")


# What each asp Parquet file holds, by its metadata key (None: predictions, which carry none).
ASP_KINDS = {b"asp.schedule": "an asp schedule", b"asp.history": "an asp history", b"asp.export": "an asp export",
             b"asp.probe": "an asp probe", b"asp.timeline": "an asp timeline", None: "predictions"}


def _asp_kind(path: Path) -> bytes | None:
    """The ``asp.*`` metadata key of an existing Parquet file (which asp command wrote it), or None: none there, or
    not a Parquet file at all."""
    if not path.is_file():
        return None
    try:
        import pyarrow.parquet as pq

        keys = (pq.read_schema(as_given(path)).metadata or {}).keys()
    except Exception:  # noqa: BLE001 - not Parquet, unreadable: not asp's, and the write says what is wrong
        return None
    return next((key for key in sorted(keys) if key.startswith(b"asp.")), None)


def check_replaces_own_kind(output: Path, what_it_is: Callable[[Path], str | None], *, writer: str, kind: str,
                            only: str) -> None:
    """Refuse ``--force`` over an existing file that is not of the kind ``writer`` writes (``kind``: "an asp cost
    preset"; ``only``, its short name: "a preset"), as `check_parquet_name` refuses one over another kind of asp
    Parquet file (E85): ``-o tokenizer.json --force`` replaced a Hugging Face tokenizer with a preset (E94), ``-o
    notmodel.skops --force`` any file with a model (E101; hostile-input rounds). ``what_it_is`` says what the file
    is where it is not of the kind (None where it is); an empty file, and one that cannot be read (the write says
    what is wrong), are replaced as before."""
    try:
        if not output.is_file() or not output.stat().st_size:
            return
        what = what_it_is(output)
    except OSError:
        return
    if what is not None:
        raise OutputError(f"{output} is not {kind} ({what}), and {writer} writes one: --force replaces only {only}; "
                          "name another output")


def check_output_name(output: Path, suffixes: tuple[str, ...], *, writer: str, what: str) -> None:
    """Refuse an output whose name says another format, as `check_parquet_name` does for Parquet (E34).

    Besides misleading whoever trusts the name, it keeps ``--force`` from replacing a file of another kind (a
    schedule overwritten by ``--html s.parquet --force``).
    """
    _refuse_folder_name(output)
    suffix = Path(output).suffix
    if suffix.lower() in suffixes:
        return
    raise SettingsError(f"{output}: {writer} writes {what}, but {_name_problem(Path(output))}; "
                        f"{_name_fix(Path(output), suffixes[0])}")


def _name_problem(output: Path) -> str:
    """What is wrong with an output's name for its format: another extension, none, or (``-o .parquet``) nothing but
    a dot and the extension, which names a hidden file with no extension (a hostile-input round was told "the name
    has no extension" of it); ``-o -`` is no standard output: asp writes every output as a file, atomically (a
    newcomer's ``asp export ... -o -`` was told to add an extension to ``-``)."""
    if str(output) == "-":
        return ("'-' is not standard output here: this output is written as a file, atomically (beside it, then "
                "renamed into place), not to stdout")
    if output.suffix:
        return f"the name ends in {output.suffix!r}"
    if output.name.startswith(".") and len(output.name) > 1:
        return f"the name {output.name!r} has nothing before its dot, so it names a hidden file with no extension"
    return "the name has no extension"


def _name_fix(output: Path, suffix: str) -> str:
    """The fix for `_name_problem`: the extension, or a whole name where the name was only one (or ``-``)."""
    if str(output) == "-":
        return f"name a file, e.g. out{suffix}"
    return f"name it {f'e.g. out{suffix}' if output.name.startswith('.') and not output.suffix else suffix}"


class OutputPath(type(Path())):  # type: ignore[misc]
    """A path that remembers the text it was given: ``Path("out.parquet/")`` forgets the trailing slash."""

    text: str

    def __new__(cls, text: str) -> OutputPath:
        path = super().__new__(cls, text)
        path.text = text
        return path


def output_path(text: str) -> Path:
    """Parse an output option: an `OutputPath`, so that `check_output_path` can refuse ``out.parquet/``."""
    return OutputPath(text)


def published() -> list[Path]:
    """The outputs put in place since `begin_command` (an interrupted command names them)."""
    return list(_published)


def begin_command() -> None:
    """Forget what an earlier command in this process published (commands run one at a time)."""
    _published.clear()


def remove_temporary_files() -> None:
    """Remove the temporary files being written (for an exit that cannot wait for the cleanup)."""
    for tmp in list(_live):
        with contextlib.suppress(OSError):
            tmp.unlink()


def check_output_path(output: Path | str, inputs: Iterable[Path] = (), *, force: bool = False) -> None:
    """Refuse an output that names a folder, equals an input, or exists without ``force``.

    Raises
    ------
    OutputError
        With the path and the fix.
    """
    if not isinstance(force, bool):  # force="no" replaced the file (a hostile-input round)
        raise SettingsError(f"force must be True or False (got {force!r})")
    check_output_kind(output)
    if isinstance(output, str) and not output.strip():  # Path("") is ".": "is a directory" from Python (E72's CLI)
        raise OutputError(f"the path is empty{' (only blanks)' if output else ''}; name the file to write")
    _refuse_folder_name(output)
    try:
        _check_output(Path(output), list(inputs), force)
    except OSError as exc:  # a name the file system refuses to look up (ENAMETOOLONG) was exit 70
        raise cannot_write(output, exc) from None


def check_output_kind(output: object) -> None:
    """Refuse an output that is not a path: a Python user's `schedule("p.jsonl", ScheduleSettings(...))`, the settings
    where the output goes, was a TypeError from pathlib (a library newcomer's round)."""
    if output is not None and not isinstance(output, (str, os.PathLike)):
        raise SettingsError(f"the output must be a path (text or a pathlib.Path), or None to keep the result in memory; "
                            f"got {type(output).__name__} (the other arguments go by keyword: settings=..., read=...)")


def _refuse_folder_name(output: Path | str) -> None:
    """E54: an output given as ``sub/`` names a folder, whatever its name says (`check_parquet_name` had said "the
    name has no extension" of it, exit 4: a hostile-input round). Only an `OutputPath` or text keeps the slash."""
    text = getattr(output, "text", None) or (output if isinstance(output, str) else None)
    if text is not None and text.endswith(("/", os.sep)):
        raise OutputError(f"{text} ends with '/', so it names a folder; name the output file without the slash")


def refuse_missing(inputs: Iterable[Path]) -> None:
    """Raise `InputError` for the first of ``inputs`` that is not there: said before an existing output, since a
    retried pipeline step was told to --force over its first try's output while its real fault was an input not
    there (a newcomer's round). Predictor files keep their own error (exit 5)."""
    missing = next((p for p in map(Path, inputs) if p.suffix != ".skops" and not os.path.lexists(p)), None)
    if missing is not None:
        from asp_cli.errors import no_such_file

        raise no_such_file(missing)


def _check_output(output: Path, inputs: Iterable[Path], force: bool) -> None:
    gone = False
    try:
        os.getcwd()
    except FileNotFoundError:  # was "(No such file or directory); check the folder's permissions", of a folder there
        gone = True
        refuse_missing(inputs)  # a relative input first, as ever: "no such file" and why (E11)
        if not output.is_absolute():
            raise OutputError(f"cannot write {output}: the working directory was removed after this shell entered it; "
                              "cd into the folder again, or give the output's full path") from None
    for path in inputs:
        path = Path(path)
        if gone and not path.is_absolute():  # not there (a predictor file, left to its reader: E21, exit 5), and
            continue  # os.path.abspath raised: "cannot write OUT (No such file or directory)", exit 7
        # os.path.exists: an input whose name the file system refuses is not the output (its reader says so).
        if os.path.exists(path) and output.exists() and os.path.samefile(path, output):
            raise OutputError(f"output {output} is also an input; write the output somewhere else")
        if os.path.abspath(path) == os.path.abspath(output):
            raise OutputError(f"output {output} is also an input; write the output somewhere else")
    if output.is_dir():
        raise OutputError(f"{output} is a directory; name a file")
    if output.exists() and not force:
        refuse_missing(inputs)
        raise OutputError(f"{output} exists; pass --force to replace it")
    _check_regular(output)
    parent = output.parent if str(output.parent) else Path(".")
    if not parent.is_dir():
        if parent.exists():  # `-o /dev/full/x.parquet` said the folder did not exist
            raise OutputError(f"{parent} is not a folder, so {output} cannot be written in it; name a path in a folder")
        from asp_cli.errors import quoted_home

        raise OutputError(f"folder {parent} does not exist" + (quoted_home(output) or "; create it first"))
    _probe_writable(_target(output))


def _check_regular(output: Path) -> None:
    """Refuse a device, pipe or socket (``-o /dev/null``): renaming onto it would replace the node itself."""
    try:
        mode = os.stat(output).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise OutputError(f"{output} is not a regular file (a device, pipe or socket); name a file")


def as_given(path: Path | str, *, output: bool = False) -> Path:
    """``path`` as a library opens it as given: Polars and PyArrow expand a leading ``~`` in a name they are
    handed, so a relative name starting with one (a folder really named ~, asp taking names as given) is made
    absolute; they read and wrote $HOME's file of that name instead (a Slurm user's round). A name that is not
    UTF-8 (bytes a Latin-1 system wrote) is refused, `InputError` or with ``output`` `OutputError`: PyArrow cannot
    take it, which was exit 70 after the work, or a whole schedule called unreadable (E127, E128)."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        from asp_cli.errors import InputError, printable

        if output:
            raise OutputError(f"{printable(text)}: the name is not valid UTF-8, which the Parquet library asp reads "
                              "and writes with cannot take; give a UTF-8 name") from None
        raise InputError(f"{printable(text)}: the name is not valid UTF-8, which the Parquet library asp reads and "
                         "writes with cannot take; rename it, or link to it under a UTF-8 name (ln -s)") from None
    return Path.cwd() / path if text.startswith("~") else Path(path)


def _target(output: Path) -> Path:
    """The file to replace: a symlink's target (the link stays a link), else ``output`` itself."""
    return Path(os.path.realpath(output)) if output.is_symlink() else output


def _tmp_path(output: Path) -> Path:
    """A temporary name beside ``output``: this process's id and this machine's (`_HOST_TAG`), so that a later run
    can tell a leftover of a killed one (`_sweep_leftovers`) from another machine's write in progress; `as_given`,
    since Polars wrote a temporary name starting with ~ into $HOME and left it there. A Parquet output whose name is
    not UTF-8 is refused (E128: no Parquet reader opens it, E127); another is written under a UTF-8 temporary name
    (`_tmp_stem`) and renamed to its own, where the refusal had taken HTML, JSON and JSON lines outputs, written
    before, and said the Parquet library could not take them."""
    if output.suffix.lower() in PARQUET_SUFFIXES:
        as_given(output, output=True)
    parent = as_given(output.parent if str(output.parent) else Path("."), output=True)
    return parent / f".{_tmp_stem(output)}{TMP_MARKER}{os.getpid()}-{secrets.token_hex(4)}.{_host_tag()}"


def _tmp_stem(output: Path) -> str:
    """``output``'s name as its temporary files start with it: the name, or where it is not UTF-8 (the writers, Polars
    and PyArrow, cannot take it) its bytes in hex."""
    try:
        output.name.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(output.name).hex()
    return output.name


# A temporary file of another machine (a shared file system), or of an asp before the machine was named in them, is
# taken for a leftover only this long after its last write.
_FOREIGN_LEFTOVER_S = 24 * 3600


def _host_tag() -> str:
    """This machine and process-id namespace: two containers that share a host name do not share process ids (a
    review: one's write removed the other's temporary file as a leftover)."""
    import hashlib
    import socket

    try:
        space = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"; none off Linux
    except OSError:
        space = ""
    return hashlib.sha256(f"{socket.gethostname()}\0{space}".encode("utf-8", "replace")).hexdigest()[:8]


def _sweep_leftovers(target: Path) -> None:
    """Remove the temporary files of ``target`` that writes killed outright (SIGKILL, a lost machine) left: this
    machine's whose process is gone, and any other untouched for `_FOREIGN_LEFTOVER_S`. A hostile-input round found
    them staying forever (4 MB a 200k-row schedule), hidden beside the output."""
    parent = target.parent if str(target.parent) else Path(".")
    prefix = f".{_tmp_stem(target)}{TMP_MARKER}"
    mine = _host_tag()
    try:
        names = [p for p in parent.iterdir() if p.name.startswith(prefix) and p not in _live]
    except OSError:
        return
    for leftover in names:
        pid, _, rest = leftover.name[len(prefix):].partition("-")
        here = rest.rpartition(".")[2] == mine and pid.isdigit()
        try:
            if here:
                try:
                    os.kill(int(pid), 0)
                    continue  # still running (or the id reused): not ours to remove
                except ProcessLookupError:
                    pass
                except (PermissionError, OverflowError, ValueError):
                    continue
            elif time.time() - leftover.stat().st_mtime < _FOREIGN_LEFTOVER_S:
                continue
            leftover.unlink()
        except OSError:
            continue


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__


def cannot_write(output: Path | str, exc: BaseException) -> OutputError:
    """The `OutputError` for a failed write of ``output``, with the reason ``exc`` gives."""
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        # asp first writes a hidden temporary name (or a lock file) some 30 characters longer than the output's.
        return OutputError(f"cannot write {output} ({_reason(exc)}); give it a shorter name (asp writes it under a "
                           "temporary name about 30 characters longer first)")
    return OutputError(f"cannot write {output} ({_reason(exc)}); check the folder's permissions and free space, "
                       "or write somewhere else")


def _probe_writable(output: Path) -> None:
    """Fail before the work, not after it, when the output's folder cannot take a new file."""
    probe = _tmp_path(output)
    try:
        with open(probe, "xb"):
            pass
    except OSError as exc:
        raise cannot_write(output, exc) from None
    finally:  # also when a signal lands just after the open made the file (it was left behind)
        with contextlib.suppress(OSError):
            probe.unlink()


# Errors of writing the output whatever the path in them; EACCES and friends count only when they name it.
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}
# Words of the IO errors Polars and PyArrow raise without an errno (or as their own exception types).
_IO_WORDS = ("os error", "io error", "no space left", "disk quota", "file too large", "read-only file system",
             "input/output error", "broken pipe", "error writing bytes")


def is_write_failure(exc: BaseException, *paths: Path) -> bool:
    """Whether ``exc``, raised while writing ``paths``, is a failure to write (rather than a bug or an input).

    An OSError counts when it has no errno (Polars raises those), an errno of a full or read-only disk, or
    names one of ``paths``; an OSError naming another file (an input that vanished) does not. Polars' and
    PyArrow's own errors count when their message is an IO error.
    """
    if isinstance(exc, OSError):
        named = [str(name) for name in (exc.filename, exc.filename2) if name]
        if exc.errno in _OUTPUT_ERRNOS or exc.errno is None:
            return not named or any(str(p) in named for p in paths) or exc.errno in _OUTPUT_ERRNOS
        return any(str(p) in str(exc) for p in paths)
    text = str(exc).lower()
    return type(exc).__module__.split(".")[0] in ("polars", "pyarrow") and any(w in text for w in _IO_WORDS)


@contextlib.contextmanager
def atomic_path(output: Path, *, replace: bool) -> Iterator[Path]:
    """Yield a temporary path beside ``output``; publish it at ``output`` when the block ends cleanly.

    ``replace`` (``--force``) renames it over an existing file; otherwise publishing fails with an
    `OutputError` if ``output`` exists by then (another run wrote it meanwhile).
    """
    output = Path(output)
    _check_regular(output)
    target = _target(output)
    tmp = _tmp_path(target)
    _live.add(tmp)
    publishing = False
    try:
        yield tmp
        if not tmp.exists():
            raise OutputError(f"nothing was written for {output}")
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        testhooks.pause("publish")
        publishing = True
        _publish(tmp, target, output, replace=replace)
        _published.append(output)
        _sweep_leftovers(target)
    except OutputError:
        _discard(tmp)
        raise
    except Exception as exc:
        _discard(tmp)
        if is_write_failure(exc, tmp, target, output):
            raise cannot_write(output, exc) from None
        raise
    except BaseException:
        # A signal that lands as the rename or link returns leaves the output in place: say so ("Interrupted
        # after writing ..."), where the list was written after it and the run said nothing was written.
        if publishing and _in_place(tmp, target) and output not in _published:
            _published.append(output)
        _discard(tmp)
        raise
    finally:
        _live.discard(tmp)
    testhooks.pause("published")


def _in_place(tmp: Path, target: Path) -> bool:
    """Whether publishing ``tmp`` at ``target`` happened: renamed away, or linked (both names one file)."""
    try:
        return not tmp.exists() or os.path.samefile(tmp, target)
    except OSError:
        return False


def _discard(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        tmp.unlink()


# link() is not supported everywhere (FAT, some network and FUSE file systems).
_NO_LINK = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV, errno.EACCES}


def _publish(tmp: Path, target: Path, output: Path, *, replace: bool) -> None:
    if replace:
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise OutputError(f"{output} exists (written while this ran); pass --force to replace it") from None
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        # Claim the name exclusively, then rename the finished file onto the claim.
        try:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            raise OutputError(f"{output} exists (written while this ran); pass --force to replace it") from None
        os.replace(tmp, target)
        return
    with contextlib.suppress(OSError):  # the output is in place: a stray second name is only untidy
        os.unlink(tmp)


def write_bytes_atomic(output: Path, data: bytes, *, replace: bool) -> None:
    """Write ``data`` to ``output`` atomically (``replace``: over an existing file)."""
    with atomic_path(output, replace=replace) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(output: Path, text: str, *, replace: bool) -> None:
    """Write ``text`` (UTF-8) to ``output`` atomically (``replace``: over an existing file). A character UTF-8 has
    none for (a file name of bytes that are not UTF-8, as Python reads it: ``\\udcff``) is written as its escape: a
    schedule made from such a file named it in its command line, and `asp report --html` died of it (exit 70)."""
    write_bytes_atomic(output, text.encode("utf-8", "backslashreplace"), replace=replace)


def _lock_path(output: Path) -> Path:
    target = _target(Path(output))
    parent = target.parent if str(target.parent) else Path(".")
    return parent / f".{target.name}{LOCK_MARKER}"


@contextlib.contextmanager
def locked(output: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``output`` for a read-modify-write (see the module docstring).

    The lock is a flock on ``.NAME.asp-lock`` beside the output, removed by the holder before it lets go (a
    newcomer found one left beside every history, in their git status). A waiter that then gets the lock of a
    file no longer at that name (removed, or made anew by a third run) lets it go and locks the file there now:
    the lock held is always the one on the name's current file (the usual unlink-safe lock file).
    """
    import fcntl

    path = _lock_path(output)
    testhooks.pause("lock-wait")
    while True:
        try:
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except IsADirectoryError:  # "check the folder's permissions" did not say what was wrong
            raise OutputError(f"{path} is a folder, where asp keeps the lock of {Path(output).name} while it "
                              "appends; remove it (rmdir) and run again") from None
        except OSError as exc:
            raise cannot_write(path, exc) from None
        try:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    # Poll rather than block: a Ctrl-C the kernel hands to another thread would not interrupt a
                    # blocking flock, and the command would wait for the other run before it could stop.
                    time.sleep(_LOCK_POLL_S)
            if not _still_named(handle, path):
                os.close(handle)
                continue
        except BaseException:
            os.close(handle)
            raise
        break
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # left behind where it cannot be removed: harmless, as before
            os.unlink(path)
        os.close(handle)  # closing the last descriptor releases the lock


def _still_named(handle: int, path: Path) -> bool:
    """Whether the open lock file ``handle`` is still the file at ``path``."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(handle)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
