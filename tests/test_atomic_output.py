"""Nothing half-written: killing `asp schedule` at any moment leaves the old file or the new one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asp_cli.output import TMP_MARKER, atomic_path, check_output_path, write_text_atomic
from asp_cli.errors import OutputError
from asp_cli.schedule_format import read_schedule

from util import make_prompts, write_jsonl


def test_atomic_path_replaces_only_on_success(tmp_path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "one", replace=True)
    with pytest.raises(RuntimeError):
        with atomic_path(target, replace=True) as tmp:
            tmp.write_text("half")
            raise RuntimeError
    assert target.read_text() == "one"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_check_output_path(tmp_path):
    (tmp_path / "a").write_text("x")
    with pytest.raises(OutputError, match="exists"):
        check_output_path(tmp_path / "a")
    check_output_path(tmp_path / "a", force=True)
    with pytest.raises(OutputError, match="is a directory"):
        check_output_path(tmp_path, force=True)


def test_an_output_name_too_long_for_the_file_system_is_exit_7_not_a_bug(tmp_path):
    """Path.exists raised ENAMETOOLONG out of check_output_path: exit 70, "internal error"; an input with such a
    name beside a good output was blamed on nothing (it is not the output: its reader says what it is)."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(12))
    long = tmp_path / ("s" * 300 + ".parquet")
    with pytest.raises(OutputError, match=r"\(File name too long\); give it a shorter name"):
        check_output_path(long)
    check_output_path(tmp_path / "ok.parquet", [tmp_path / ("h" * 300 + ".jsonl")])
    result = CliRunner().invoke(app, ["schedule", str(prompts), "-o", str(long)])
    assert result.exit_code == 7 and result.stderr.count("\n") == 1, result.output
    assert "give it a shorter name" in result.stderr and os.listdir(tmp_path) == ["p.jsonl"]


def test_check_output_path_refuses_devices_and_pipes(tmp_path):
    """Renaming onto /dev/null (as root) would replace the device node with a file: refuse it and pipes."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/null")):
        if not target.exists():
            continue
        with pytest.raises(OutputError, match="is not a regular file"):
            check_output_path(target, force=True)
        with pytest.raises(OutputError, match="is not a regular file"):
            write_text_atomic(target, "x", replace=True)
    assert Path("/dev/null").is_char_device() or not Path("/dev/null").exists()


def test_atomic_path_writes_through_a_symlink(tmp_path):
    """A symlinked output keeps its link; the file it points to is replaced."""
    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "link.txt").symlink_to("real.txt")
    check_output_path(tmp_path / "link.txt", force=True)
    write_text_atomic(tmp_path / "link.txt", "new", replace=True)
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"]


def test_unwritable_output_is_an_output_error(tmp_path, monkeypatch):
    """A folder that cannot take the file, or a full disk, is exit 7 with the path, not an internal error."""
    import errno

    if Path("/proc/self").is_dir():
        with pytest.raises(OutputError, match=r"cannot write /proc/o\.parquet \("):
            check_output_path(Path("/proc/o.parquet"))
    target = tmp_path / "out.txt"
    with pytest.raises(OutputError, match="cannot write .*out.txt .*No space left"):
        with atomic_path(target, replace=True) as tmp:
            tmp.write_text("partial")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match="unrelated"):  # other OS errors (an input vanishing) are not relabelled
        with atomic_path(target, replace=True):
            raise FileNotFoundError(errno.ENOENT, "unrelated", "/elsewhere/input.jsonl")


def _command(source, out):
    return [sys.executable, "-m", "asp_cli", "schedule", str(source), "-o", str(out), "--force", "--quiet",
            "--epochs", "3"]


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    """A large input and how long a clean run on it takes here, so kills can land in every phase."""
    folder = tmp_path_factory.mktemp("big")
    source = write_jsonl(folder / "prompts.jsonl", make_prompts(60_000, seed=1))
    start = time.perf_counter()
    subprocess.run(_command(source, folder / "clean.parquet"), check=True)
    return source, time.perf_counter() - start


# SIGKILL at moments spread over a run (reading, predicting, arranging, writing). Ctrl-C and SIGTERM are
# tested deterministically at named points in tests/test_errors_table.py (E29), and SIGKILL exactly before
# and after the output is put in place in tests/test_hostile.py, so four timed kills keep this test's reach
# (12 timed runs before, half the suite's time).
@pytest.mark.slow
@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.85, 0.97])
def test_kill_at_any_moment_leaves_old_or_new(tmp_path, big_input, fraction):
    source, clean_s = big_input
    out = tmp_path / "schedule.parquet"
    out.write_bytes(b"previous schedule")
    proc = subprocess.Popen(_command(source, out), stderr=subprocess.PIPE)
    time.sleep(clean_s * fraction)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    content = out.read_bytes()
    if content != b"previous schedule":
        assert read_schedule(out).frame.height == 3 * 60_000  # the new file, complete
    # SIGKILL cannot be caught: a temporary file may stay, named so that it is recognisable.
    leftovers = [p.name for p in tmp_path.iterdir() if TMP_MARKER in p.name]
    assert all(name.startswith(".schedule.parquet" + TMP_MARKER) for name in leftovers)


def test_an_interrupt_as_the_output_lands_says_it_was_written(tmp_path, monkeypatch):
    """A signal just after the rename returned, before the output was listed as published: the run said
    "nothing was written" over a new file."""
    from asp_cli import output

    real = output._publish

    def published_then_interrupted(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(output, "_publish", published_then_interrupted)
    target = tmp_path / "o.txt"
    output.begin_command()
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(target, "new", replace=False)
    assert target.read_text() == "new" and output.published() == [target]
    assert [p.name for p in tmp_path.iterdir()] == ["o.txt"]  # the temporary name is gone too


def test_an_interrupt_in_the_write_check_leaves_no_probe_file(tmp_path, monkeypatch):
    """The folder's write check made a temporary file; a signal landing as it was made left it behind."""
    import builtins

    from asp_cli import output

    def made_then_interrupted(path, mode="r", *args, **kwargs):
        if mode == "xb" and TMP_MARKER in str(path):
            builtins.open(path, mode).close()
            raise KeyboardInterrupt
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(output, "open", made_then_interrupted, raising=False)
    with pytest.raises(KeyboardInterrupt):
        output._probe_writable(tmp_path / "o.parquet")
    assert list(tmp_path.iterdir()) == []


def test_an_output_under_a_file_says_the_file_is_no_folder(tmp_path):
    """`-o /dev/full/x.parquet` said the folder did not exist: it does, and is no folder."""
    (tmp_path / "a.jsonl").write_text("{}\n")
    with pytest.raises(OutputError, match=r"a.jsonl is not a folder, so .*a.jsonl/x.parquet cannot be written in it"):
        check_output_path(tmp_path / "a.jsonl" / "x.parquet", [])
    with pytest.raises(OutputError, match=r"folder .*nowhere does not exist; create it first"):
        check_output_path(tmp_path / "nowhere" / "x.parquet", [])


def test_a_later_write_removes_the_leftovers_of_killed_ones(tmp_path):
    """SIGKILL leaves the temporary file (nothing can catch it); a hostile-input round found them staying forever
    beside the output. The next write of that output removes this machine's whose process is gone, and another
    machine's (a shared file system) only once a day has passed without a write to it."""
    from asp_cli.output import _host_tag

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    out = tmp_path / "s.txt"
    dead = tmp_path / f".s.txt{TMP_MARKER}{gone.pid}-0000.{_host_tag()}"
    alive = tmp_path / f".s.txt{TMP_MARKER}{os.getpid()}-0001.{_host_tag()}"
    foreign = tmp_path / f".s.txt{TMP_MARKER}{gone.pid}-0002.ffffffff"
    old = tmp_path / f".s.txt{TMP_MARKER}{gone.pid}-0003"  # the name before the machine was in it
    for path in (dead, alive, foreign, old):
        path.write_bytes(b"half")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    write_text_atomic(out, "new", replace=False)
    assert out.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir() if TMP_MARKER in p.name) == sorted([alive.name, foreign.name])


def test_an_output_named_only_by_its_extension_is_told_to_take_a_name(tmp_path):
    """`-o .parquet` was told "the name has no extension; name it .parquet" (a hostile-input round)."""
    from asp_cli.errors import SettingsError
    from asp_cli.output import check_output_name, check_parquet_name

    with pytest.raises(SettingsError, match=r"the name '\.parquet' has nothing before its dot, so it names a hidden "
                                            r"file with no extension; name it e\.g\. out\.parquet$"):
        check_parquet_name(tmp_path / ".parquet", writer="asp schedule")
    with pytest.raises(SettingsError, match=r"the name ends in '\.csv'; name it \.parquet$"):
        check_parquet_name(tmp_path / "s.csv", writer="asp schedule")
    with pytest.raises(SettingsError, match=r"the name has no extension; name it \.html$"):
        check_output_name(tmp_path / "page", (".html",), writer="--html", what="an HTML page")


def test_an_output_that_is_not_a_path_is_a_settings_error_naming_the_keywords(tmp_path):
    """A library newcomer's round: `schedule("p.jsonl", ScheduleSettings(...))` (the settings given where the output
    goes) and `observe(log, ReadOptions())` were TypeErrors from pathlib."""
    import re

    import asp_cli
    from asp_cli.errors import SettingsError
    from util import make_prompts, write_jsonl

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(4))
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p0", "response_tokens": 5}])
    for call, kind in ((lambda: asp_cli.schedule(prompts, asp_cli.ScheduleSettings()), "ScheduleSettings"),
                       (lambda: asp_cli.observe(log, asp_cli.ReadOptions()), "ReadOptions"),
                       (lambda: asp_cli.schedule(prompts, 5), "int"), (lambda: asp_cli.probe(prompts, 5), "int"),
                       (lambda: asp_cli.export(asp_cli.schedule(prompts), prompts, 5), "int")):
        with pytest.raises(SettingsError, match=re.escape(
                f"the output must be a path (text or a pathlib.Path), or None to keep the result in memory; got "
                f"{kind} (the other arguments go by keyword: settings=..., read=...)")):
            call()


def test_an_output_in_a_folder_named_tilde_is_written_there_not_in_home(tmp_path, monkeypatch):
    """asp takes names as given, so `-o "~/s.parquet"` beside a folder really named ~ (one that a quoted ~ made, E126)
    writes there; but Polars expands a ~ in the temporary name it is handed: the file went to $HOME under its
    temporary name, left there, and the run failed with "nothing was written" (exit 7; a Slurm user's round)."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    runner = CliRunner()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    (work / "~").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    write_jsonl(work / "~" / "p.jsonl", make_prompts(40))
    write_jsonl(work / "~" / "r.jsonl", [{"prompt_id": f"p{i}", "response_tokens": 10 + i} for i in range(40)])
    commands = [["schedule", "~/p.jsonl", "-o", "~/s.parquet", "--train-batch-size", "20"],  # verl: a whole batch
                ["export", "~/s.parquet", "~/p.jsonl", "-o", "~/e.parquet"],
                ["export", "~/s.parquet", "~/p.jsonl", "-o", "~/v.parquet", "--format", "verl"],
                ["observe", "~/r.jsonl", "-o", "~/h.parquet", "--dataset", "~/p.jsonl"],
                ["schedule", "~/p.jsonl", "-o", "~/s1.parquet", "--history", "~/h.parquet", "--seed", "1"],
                ["simulate", "~/s.parquet", "--lengths", "~/h.parquet", "--timeseries", "~/t.parquet"]]
    for args in commands:
        result = runner.invoke(app, [*args, "--quiet"])
        assert result.exit_code == 0, (args, result.stderr)
        assert (work / args[-1 if "-o" not in args else args.index("-o") + 1]).is_file()
    assert list(home.iterdir()) == []


def test_a_name_that_is_not_utf8_is_one_line_not_a_bug(tmp_path, monkeypatch):
    """A file name of bytes that are not UTF-8 (Linux allows any; a Latin-1 system's files): PyArrow cannot take
    it, so `-o` such a name ended in exit 70 (a UnicodeEncodeError, 'a bug in asp') after all the work, and a
    schedule so named was `unreadable Parquet file ...; write the schedule again` (exit 6) though it was whole (an
    ops round). Both are refused, naming the file and the fix: E127 (an input, exit 3), E128 (an output, exit 7)."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "p.jsonl", make_prompts(30))
    bad = os.fsdecode(b"s\xfe.parquet")
    for args in (["schedule", "p.jsonl", "-o", bad], ["schedule", "p.jsonl", "-o", os.fsdecode(b"d\xfe") + "/s.parquet"],
                 ["predictor", "predict", "p.jsonl", "-o", bad]):
        Path(args[-1]).parent.mkdir(exist_ok=True)
        result = runner.invoke(app, [*args, "--quiet"])
        assert result.exit_code == 7, (args, result.stderr)
        assert result.stderr == (f"Error: {args[-1].encode('utf-8', 'backslashreplace').decode()}: the name is not "
                                 "valid UTF-8, which the Parquet library asp reads and writes with cannot take; give "
                                 "a UTF-8 name\n"), result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [os.fsdecode(b"d\xfe"), "p.jsonl"]
    assert runner.invoke(app, ["schedule", "p.jsonl", "-o", "s.parquet", "--quiet"]).exit_code == 0
    os.rename("s.parquet", bad)
    write_jsonl(tmp_path / "r.jsonl", [{"prompt_id": "p0", "response_tokens": 5}])
    for args in (["report", bad], ["simulate", bad], ["export", bad, "p.jsonl", "-o", "e.parquet"],
                 ["observe", "r.jsonl", "-o", "h.parquet", "--schedule", bad]):
        result = runner.invoke(app, [*args, "--quiet"] if args[0] != "report" else args)
        assert result.exit_code == 3, (args, result.stderr)
        assert result.stderr == ("Error: s\\udcfe.parquet: the name is not valid UTF-8, which the Parquet library asp "
                                 "reads and writes with cannot take; rename it, or link to it under a UTF-8 name "
                                 "(ln -s)\n"), result.stderr


def test_an_output_in_a_working_directory_that_was_removed_says_so(tmp_path, monkeypatch):
    """A job left in a folder that a cleanup removed (or removed and made again: `rm -rf run && mkdir run` from
    another shell) writes a relative output: it was `cannot write s.parquet (No such file or directory); check the
    folder's permissions and free space`, of a folder the user could list (an ops round). E26, exit 7."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    write_jsonl(tmp_path / "p.jsonl", make_prompts(20))
    gone = tmp_path / "run"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    gone.mkdir()  # made again: the path is there, the process's working directory is not
    result = CliRunner().invoke(app, ["schedule", str(tmp_path / "p.jsonl"), "-o", "s.parquet", "--quiet"])
    assert result.exit_code == 7, result.stderr
    assert result.stderr == ("Error: cannot write s.parquet: the working directory was removed after this shell entered "
                             "it; cd into the folder again, or give the output's full path\n")
    assert list(gone.iterdir()) == []


def test_an_output_not_parquet_whose_name_is_not_utf8_is_written(tmp_path, monkeypatch):
    """E128 refused every output whose name is not UTF-8, saying the Parquet library could not take it: an HTML
    report, a JSON-lines export and a probe's JSON lines, which asp wrote before (Python writes any name), were exit
    7. They are written under a UTF-8 temporary name (the writers, Polars and PyArrow, cannot take the other) and
    renamed to their own; nothing is left beside them. A Parquet output so named is still refused (no Parquet reader
    opens it: E127)."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "p.jsonl", make_prompts(30))
    assert runner.invoke(app, ["schedule", "p.jsonl", "-o", "s.parquet", "--quiet"]).exit_code == 0
    names = {os.fsdecode(b"r\xfe.html"): ["report", "s.parquet", "--html"],
             os.fsdecode(b"e\xfe.jsonl"): ["export", "s.parquet", "p.jsonl", "--format", "jsonl", "--quiet", "-o"],
             os.fsdecode(b"pr\xfe.jsonl"): ["probe", "p.jsonl", "--quiet", "-o"]}
    for name, args in names.items():
        result = runner.invoke(app, [*args, name])
        assert result.exit_code == 0, (name, result.stderr)
        assert Path(name).stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["p.jsonl", "s.parquet", *names])
    result = runner.invoke(app, ["export", "s.parquet", "p.jsonl", "-o", os.fsdecode(b"e\xfe.parquet"), "--quiet"])
    assert result.exit_code == 7 and "not valid UTF-8" in result.stderr, result.stderr
