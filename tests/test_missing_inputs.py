"""A missing input file is exit 3 with one `Error: FILE: no such file` line, whichever command and option reads
it (docs/errors.md E11). Predictor model files keep their own code (E21, exit 5)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from asp_cli.cli.main import app

from util import write_jsonl

runner = CliRunner()

# Each command line names exactly one missing file, "{tmp}/missing.*"; every other file exists.
CASES = [
    ["schedule", "{tmp}/missing.jsonl", "-o", "{tmp}/o.parquet"],
    ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/missing.jsonl"],
    ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--predictions", "{tmp}/missing.parquet"],
    ["report", "{tmp}/missing.parquet"],
    ["report", "{tmp}/s.parquet", "--compare", "{tmp}/missing.parquet"],
    ["report", "{tmp}/s.parquet", "--lengths", "{tmp}/missing.jsonl"],
    ["simulate", "{tmp}/missing.parquet"],
    ["simulate", "{tmp}/s.parquet", "--lengths", "{tmp}/missing.jsonl"],
    ["export", "{tmp}/missing.parquet", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet"],
    ["export", "{tmp}/s.parquet", "{tmp}/missing.jsonl", "-o", "{tmp}/o.parquet"],
    ["observe", "{tmp}/missing.jsonl", "-o", "{tmp}/h.parquet"],
    ["observe", "{tmp}/log.jsonl", "-o", "{tmp}/h.parquet", "--schedule", "{tmp}/missing.parquet"],
    ["observe", "{tmp}/log.jsonl", "-o", "{tmp}/h.parquet", "--dataset", "{tmp}/missing.jsonl"],
    ["predictor", "fit", "{tmp}/missing.jsonl", "-o", "{tmp}/m.skops"],
    ["predictor", "fit", "{tmp}/good.jsonl", "--history", "{tmp}/missing.jsonl", "-o", "{tmp}/m.skops"],
    ["predictor", "eval", "{tmp}/missing.jsonl"],
    ["predictor", "eval", "{tmp}/observed.jsonl", "--history", "{tmp}/missing.jsonl"],
    ["predictor", "eval", "{tmp}/good.jsonl", "--lengths", "{tmp}/missing.jsonl"],
    ["predictor", "predict", "{tmp}/missing.jsonl", "-o", "{tmp}/p.parquet"],
    ["bench", "--data", "{tmp}/missing"],
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("missing")
    write_jsonl(tmp / "good.jsonl", [{"id": "a", "question": "What is 2+2?"}, {"id": "b", "question": "Why?"}])
    write_jsonl(tmp / "log.jsonl", [{"prompt_id": "a", "response_tokens": 12}])
    write_jsonl(tmp / "observed.jsonl", [{"id": "a", "question": "What is 2+2?", "response_tokens": 12},
                                         {"id": "b", "question": "Why?", "response_tokens": 40}])
    result = runner.invoke(app, ["schedule", str(tmp / "good.jsonl"), "-o", str(tmp / "s.parquet"), "--quiet"])
    assert result.exit_code == 0, result.stderr
    return tmp


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a).replace("{tmp}/", "") for a in CASES])
def test_a_missing_input_is_exit_3(folder, args):
    result = runner.invoke(app, [a.replace("{tmp}", str(folder)) for a in args])
    missing = next(a for a in args if "missing" in a).replace("{tmp}", str(folder))
    assert result.exit_code == 3, result.stderr
    assert result.stderr.startswith("Error: ") and missing in result.stderr
    assert "no such" in result.stderr and result.stderr.strip().count("\n") == 0
    assert result.stdout == ""


# The same command lines, each naming one file asp may not read instead of the missing one. Click's own check
# (`readable=True`, Typer's default for a Path) refused such a file as a usage error: exit 2 and four lines
# ("Usage: ...", "Invalid value for 'INPUTS': path 'x' is not readable."). The library reads every input and says
# what is wrong with it, once.
UNREADABLE = [[a.replace("missing", "unreadable") for a in args] for args in CASES if args[0] != "bench"]


def _unreadable_copies(folder):
    """Readable copies named unreadable.* of the files the cases read (the library reads them; Click must not
    judge them first)."""
    import shutil

    shutil.copy(folder / "good.jsonl", folder / "unreadable.jsonl")
    shutil.copy(folder / "s.parquet", folder / "unreadable.parquet")
    for output in ("o.parquet", "h.parquet", "m.skops", "p.parquet"):  # an earlier case's output: exit 7 first
        (folder / output).unlink(missing_ok=True)


@pytest.mark.parametrize("args", UNREADABLE, ids=[" ".join(a).replace("{tmp}/", "") for a in UNREADABLE])
def test_click_does_not_judge_whether_an_input_is_readable(folder, args, monkeypatch):
    import os

    _unreadable_copies(folder)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
        False if "unreadable" in str(path) and mode & os.R_OK else real_access(path, mode, **kw)))
    result = runner.invoke(app, [a.replace("{tmp}", str(folder)) for a in args])
    assert result.exit_code != 2, result.stderr
    assert "is not readable" not in result.stderr and "Usage:" not in result.stderr


@pytest.mark.parametrize("args", UNREADABLE, ids=[" ".join(a).replace("{tmp}/", "") for a in UNREADABLE])
def test_an_unreadable_input_is_one_line(folder, args):
    _unreadable_copies(folder)
    for name in ("unreadable.jsonl", "unreadable.parquet"):
        (folder / name).chmod(0)
    try:
        try:
            (folder / "unreadable.jsonl").read_bytes()
            pytest.skip("this user reads a file without read permission (root)")
        except PermissionError:
            pass
        result = runner.invoke(app, [a.replace("{tmp}", str(folder)) for a in args])
    finally:
        for name in ("unreadable.jsonl", "unreadable.parquet"):
            (folder / name).chmod(0o644)
    assert result.exit_code == 3, result.stderr
    assert result.stderr.startswith("Error: ") and "cannot be read (Permission denied)" in result.stderr
    assert result.stderr.strip().count("\n") == 0


def test_a_schedule_without_read_permission_is_exit_3_not_a_bug(folder, monkeypatch):
    """read_schedule met a PermissionError unprepared: exit 70, "internal error", for report, simulate, export,
    replay and observe --schedule (an audit ran them on a chmod 0 schedule)."""
    import builtins

    from asp_cli import schedule_format

    def denied(path, *args, **kwargs):
        if "s.parquet" in str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(schedule_format, "open", denied, raising=False)
    result = runner.invoke(app, ["report", str(folder / "s.parquet")])
    assert result.exit_code == 3, result.stderr
    assert result.stderr.startswith(f"Error: {folder / 's.parquet'}: cannot be read (Permission denied); ")
    assert result.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a).replace("{tmp}/", "") for a in CASES])
def test_an_input_named_past_the_file_systems_limit_is_exit_3(folder, args):
    """Path.is_file and its kin raise ENAMETOOLONG for a name part over 255 bytes, where a missing file gives
    False: every command's first look at such an input was exit 70, "internal error"."""
    long = "m" * 300
    result = runner.invoke(app, [a.replace("{tmp}/missing", "{tmp}/" + long).replace("{tmp}", str(folder))
                                 for a in args])
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("Error: ") and long in result.stderr
    assert "the name is too long for the file system, so no such file exists" in result.stderr
    assert result.stderr.strip().count("\n") == 0 and result.stdout == ""


@pytest.mark.parametrize("args", [
    ["schedule", "BAD", "-o", "{tmp}/o.parquet"],
    ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "BAD"],
    ["simulate", "{tmp}/s.parquet", "--lengths", "BAD"],
    ["export", "{tmp}/s.parquet", "BAD", "-o", "{tmp}/o.parquet"],
])
@pytest.mark.parametrize("bad, words", [
    ("{tmp}/good.jsonl/x.jsonl", "no such file"),  # a path through a file: NotADirectoryError
    ("{tmp}/loop.jsonl", "cannot be read (Too many levels of symbolic links)"),  # ELOOP; Path.resolve raised
])
def test_a_path_through_a_file_or_a_symlink_loop_is_exit_3_not_a_bug(folder, args, bad, words):
    """Both were exit 70, "internal error": only a missing file, a folder and no permission were expected."""
    import os

    for name, target in (("loop.jsonl", "loop2.jsonl"), ("loop2.jsonl", "loop.jsonl")):
        if not os.path.lexists(folder / name):
            os.symlink(folder / target, folder / name)
    (folder / "o.parquet").unlink(missing_ok=True)
    bad = bad.replace("{tmp}", str(folder))
    result = runner.invoke(app, [bad if a == "BAD" else a.replace("{tmp}", str(folder)) for a in args])
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"Error: {bad}: {words}") and result.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [a for a in CASES if "-o" in a], ids=lambda a: " ".join(a).replace("{tmp}/", ""))
def test_a_missing_input_is_said_before_an_existing_output(folder, args):
    """A retried pipeline step: the output of its first try is there and an input is not. The input is the fault
    (exit 3); before, the run was told to --force over the output (exit 7) and failed again on the input."""
    from pathlib import Path

    named = [a.replace("{tmp}", str(folder)) for a in args]
    output = Path(named[named.index("-o") + 1])
    existed = output.exists()
    if not existed:
        output.write_bytes(b"first try")
    try:
        result = runner.invoke(app, named)
        assert result.exit_code == 3 and "no such" in result.stderr, result.stderr
    finally:
        if not existed:
            output.unlink()


HOME_CASES = [[a.replace("{tmp}/missing", "~/missing") for a in args] for args in CASES if args[0] != "bench"]


@pytest.mark.parametrize("args", HOME_CASES, ids=[" ".join(a).replace("{tmp}/", "") for a in HOME_CASES])
def test_a_quoted_tilde_is_named_as_the_fault(folder, args, monkeypatch):
    """A pipeline passes `--history "~/runs/h.parquet"` (a quoted ~, which the shell leaves as it is; or a path
    from a config file): asp said `~/runs/h.parquet: no such file`, a file the user could see was there (a Slurm
    user's round). The message names the quoted ~ and the path it meant (E125)."""
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(folder)  # no folder named ~ here
    result = runner.invoke(app, [a.replace("{tmp}", str(folder)) for a in args])
    assert result.exit_code == 3, result.stderr
    assert result.stderr.startswith("Error: ~/missing.") and result.stderr.count("\n") == 1, result.stderr
    assert "the shell expands ~ only outside quotes, and asp takes the name as given (a folder named ~)" in result.stderr
    assert f"write {folder}/missing." in result.stderr


def test_a_quoted_tilde_in_an_output_is_named_as_the_fault(folder, monkeypatch, tmp_path):
    """`-o "~/runs/s.parquet"` said `folder ~/runs does not exist; create it first`, which made a folder named ~ in
    the working directory (E126)."""
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["schedule", str(folder / "good.jsonl"), "-o", "~/runs/s.parquet", "--quiet"])
    assert result.exit_code == 7, result.stderr
    assert result.stderr == (f"Error: folder ~/runs does not exist; the shell expands ~ only outside quotes, and asp "
                             f"takes the name as given (a folder named ~): write {folder}/runs/s.parquet, or leave the ~ "
                             f"outside the quotes\n")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("option, name, code", [("--preset", "~/cal.json", 4), ("--tokenizer", "~/tokenizer.json", 3),
                                                ("--predictor", "~/m.skops", 5)])
def test_a_quoted_tilde_in_an_option_file_is_named_as_the_fault(folder, monkeypatch, tmp_path, option, name, code):
    """The same quoted ~ in the options that name a calibration, tokenizer or predictor file (E125's message; each
    keeps its own exit code): they said only 'no such file'."""
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["schedule", str(folder / "good.jsonl"), "-o", "o.parquet", option, name])
    assert result.exit_code == code, result.stderr
    assert result.stderr.count("\n") == 1 and name in result.stderr, result.stderr
    assert result.stderr.rstrip().endswith("; the shell expands ~ only outside quotes, and asp takes the name as given "
                                           f"(a folder named ~): write {folder}/{name[2:]}, or leave the ~ outside the "
                                           "quotes"), result.stderr


GONE_CASES = [[a.replace("{tmp}/missing", "missing") for a in args] for args in CASES]


@pytest.mark.parametrize("args", GONE_CASES, ids=[" ".join(a).replace("{tmp}/", "") for a in GONE_CASES])
def test_a_relative_input_in_a_removed_working_directory_says_so(folder, args, monkeypatch, tmp_path):
    """A shell left in a folder that was removed and made again (`rm -rf run && mkdir run` from another shell) names
    a relative input: it said only `missing.jsonl: no such file`, of a file the user could list there; outputs
    already said what happened (E26). E11, exit 3."""
    gone = tmp_path / "run"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    gone.mkdir()
    result = runner.invoke(app, [a.replace("{tmp}", str(folder)) for a in args])
    assert result.exit_code == 3, result.stderr
    assert result.stderr.startswith(("Error: missing", "Error: --data missing")), result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.rstrip().endswith(
        "; the working directory was removed after this shell entered it: cd into the folder again, or give its "
        "full path"), result.stderr


def test_a_relative_predictor_in_a_removed_working_directory_keeps_its_own_error(folder, monkeypatch, tmp_path):
    """A relative --predictor where the working directory was removed, beside a full output path, was `cannot write
    OUT (No such file or directory); check the folder's permissions and free space` (exit 7) of a folder that is
    there: the output check compared the model file's absolute path, which cannot be told. It is E21's exit 5 with
    the removed directory named, as a relative input of any other kind is (E11)."""
    gone = tmp_path / "run"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    gone.mkdir()
    result = runner.invoke(app, ["schedule", str(folder / "good.jsonl"), "-o", str(tmp_path / "o.parquet"),
                                 "--predictor", "m.skops", "--quiet"])
    assert result.exit_code == 5, result.stderr
    assert result.stderr == ("Error: m.skops: no such model file; the working directory was removed after this shell "
                             "entered it: cd into the folder again, or give its full path\n")
    assert not (tmp_path / "o.parquet").exists()
