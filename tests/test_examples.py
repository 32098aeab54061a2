"""The examples a framework runs, against stand-ins of what they import from it (the framework is not on PyPI)."""

from __future__ import annotations

import asyncio
import enum
import importlib.util
import json
import sys
import types
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from asp_cli.cli.main import app

from util import REPO, SAMPLE_PROMPTS


class _Status(enum.Enum):  # slime/utils/types.py, Sample.Status (v0.3.1)
    COMPLETED = "completed"
    TRUNCATED = "truncated"


def _slime_hook(monkeypatch, tmp_path, async_rm, batched_async_rm):
    """examples/slime_length_log.py loaded with ``async_rm`` and ``batched_async_rm`` standing in for
    slime.rollout.rm_hub's, logging to ``tmp_path``/lengths.jsonl."""
    for name in ("slime", "slime.rollout"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "slime.rollout.rm_hub",
                        SimpleNamespace(async_rm=async_rm, batched_async_rm=batched_async_rm))
    spec = importlib.util.spec_from_file_location("slime_length_log", REPO / "examples" / "slime_length_log.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("ASP_LENGTH_LOG", str(tmp_path / "lengths.jsonl"))
    return module


@pytest.fixture
def slime_log(tmp_path, monkeypatch):
    """examples/slime_length_log.py with slime.rollout.rm_hub.async_rm standing in: v0.3.1's dispatch, which calls
    ``--custom-rm-path`` first when it is set (it must not be, or the hook would call itself)."""
    calls = []

    async def async_rm(args, sample, **kwargs):
        assert args.custom_rm_path is None
        calls.append(sample)
        return 1.0

    async def batched_async_rm(args, samples, **kwargs):  # v0.3.1: custom_rm_path first, else async_rm per sample
        assert args.custom_rm_path is None
        return [await async_rm(args, one) for one in samples]

    module = _slime_hook(monkeypatch, tmp_path, async_rm, batched_async_rm)
    return module, calls


def test_the_slime_hook_logs_what_asp_observe_reads(slime_log, tmp_path):
    module, calls = slime_log
    runner = CliRunner()
    made = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(tmp_path / "s.parquet"), "--quiet"])
    assert made.exit_code == 0, made.output
    exported = runner.invoke(app, ["export", str(tmp_path / "s.parquet"), str(SAMPLE_PROMPTS), "-o",
                                   str(tmp_path / "o.jsonl"), "--format", "jsonl", "--metadata-key", "metadata",
                                   "--quiet"])
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()[:5]]
    args = SimpleNamespace(custom_rm_path="slime_length_log.reward_func", rm_type="dapo")
    for k, row in enumerate(rows):  # a sample as slime's Dataset makes it: the row's metadata object kept
        sample = SimpleNamespace(metadata=row["metadata"], response_length=100 + k,
                                 status=_Status.TRUNCATED if k == 0 else _Status.COMPLETED)
        assert asyncio.run(module.reward_func(args, sample)) == 1.0
    eval_sample = SimpleNamespace(metadata={"rm_type": "math"}, response_length=7, status=_Status.COMPLETED)
    assert asyncio.run(module.reward_func(args, eval_sample)) == 1.0 and len(calls) == 6
    assert args.custom_rm_path == "slime_length_log.reward_func"  # the caller's args untouched
    logged = [json.loads(line) for line in (tmp_path / "lengths.jsonl").read_text().splitlines()]
    assert [(r["prompt_id"], r["response_tokens"], r["truncated"]) for r in logged] == [
        (row["metadata"]["prompt_id"], 100 + k, k == 0) for k, row in enumerate(rows)]
    # The history holds the truncation flag as logged.
    observed = runner.invoke(app, ["observe", str(tmp_path / "lengths.jsonl"), "-o", str(tmp_path / "h.parquet"),
                                   "--schedule", str(tmp_path / "s.parquet"), "--epoch", "0", "--json", "--quiet"])
    assert observed.exit_code == 0, observed.output
    document = json.loads(observed.stdout)
    assert document["rows_added"] == 5 and document["unknown_ids"] == 0 and document["history_prompts"] == 5
    import polars as pl

    history = pl.read_parquet(tmp_path / "h.parquet")
    assert history.filter(pl.col("truncated"))["prompt_id"].to_list() == [rows[0]["metadata"]["prompt_id"]]


def test_the_slime_hook_takes_a_list_and_asps_prefixed_id(slime_log, tmp_path):
    """A custom generate function returning several samples makes slime pass a list (batched_async_rm); and with
    `asp export --prefix asp_` (the rows' own metadata has a prompt_id) asp's id is asp_prompt_id, which must win."""
    module, calls = slime_log
    args = SimpleNamespace(custom_rm_path="slime_length_log.reward_func")
    samples = [SimpleNamespace(metadata={"prompt_id": "own-1", "asp_prompt_id": "7"}, response_length=40,
                               status=_Status.COMPLETED),
               SimpleNamespace(metadata=None, response_length=3, status=_Status.COMPLETED)]
    assert asyncio.run(module.reward_func(args, samples)) == [1.0, 1.0] and len(calls) == 2
    logged = [json.loads(line) for line in (tmp_path / "lengths.jsonl").read_text().splitlines()]
    assert logged == [{"prompt_id": "7", "response_tokens": 40, "truncated": False}]


def test_the_openrlhf_hook_logs_each_response_and_returns_the_users_reward(tmp_path, monkeypatch):
    """examples/openrlhf_length_log.py called as OpenRLHF 0.11.2 calls a reward function loaded from
    ``--reward.remote_url``: in threads (``asyncio.to_thread``), with lists of one, the query decoded with its special
    tokens. Its log, observed with a tokenizer that knows the end-of-sequence token, gives each response its exact
    count, the end token included, with no note that it is one short (that is verl's dumps')."""
    tokenizers = pytest.importorskip("tokenizers")
    prompts = [{"id": f"q{i}", "prompt": f"question number {i} please"} for i in range(4)]
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    own = tmp_path / "my_reward.py"
    own.write_text("def reward_func(queries, prompts, labels):\n"
                   "    return {'rewards': [float(len(q)) for q in queries], 'scores': [1.0], 'extra_logs': {}}\n")
    spec = importlib.util.spec_from_file_location("reward_func", REPO / "examples" / "openrlhf_length_log.py")
    monkeypatch.delenv("ASP_REWARD_FUNC", raising=False)
    # Without the user's reward function the run stops as OpenRLHF loads the file (a newcomer's round: raised from
    # reward_func, OpenRLHF logs it at INFO and trains with no reward).
    with pytest.raises(RuntimeError, match="set ASP_REWARD_FUNC"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    monkeypatch.setenv("ASP_REWARD_FUNC", str(own))
    monkeypatch.setenv("ASP_LENGTH_LOG", str(tmp_path / "lengths{host}.jsonl"))
    monkeypatch.setattr("socket.gethostname", lambda: "")  # {host}: each node its own log; one node here
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as OpenRLHF loads it (utils/agent.py:196-205)

    async def rollout():
        calls = []
        for i, p in enumerate(prompts):  # the chat template applied, then the response with its end token
            templated = f"<user> {p['prompt']} <assistant>"
            for k in range(2):
                query = templated + " word" * (i + 2 * k + 1) + (" </s>" if k == 0 else "")  # sample 1: at the cap
                calls.append(asyncio.to_thread(module.reward_func, [query], [templated], [None]))
        calls.append(asyncio.to_thread(module.reward_func, ["decoded otherwise"], ["<user> x"], [None]))
        return await asyncio.gather(*calls)

    results = asyncio.run(rollout())
    assert results[0] == {"rewards": [float(len("<user> question number 0 please <assistant> word </s>"))],
                          "scores": [1.0], "extra_logs": {}}
    logged = [json.loads(line) for line in (tmp_path / "lengths.jsonl").read_text().splitlines()]
    # The threads append in whatever order they run: one line per sample, each whole.
    assert len(logged) == 8 and {"input": "<user> question number 0 please <assistant>", "output": " word </s>"} in logged
    vocab = {"[UNK]": 0, "word": 1, "</s>": 2}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(["</s>"])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    observed = CliRunner().invoke(app, ["observe", str(tmp_path / "lengths.jsonl"), "-o", str(tmp_path / "h.parquet"),
                                        "--dataset", str(dataset), "--tokenizer", str(tmp_path / "tokenizer.json"),
                                        "--epoch", "0", "--json"])
    assert observed.exit_code == 0, observed.output
    document = json.loads(observed.stdout)
    assert document["eos_short_lengths"] == 4 and document["whole_lengths"] == 4  # the four at the cap hold no end token
    assert document["warnings"][0] == (  # not verl's "1 token short" (a review)
        "4 response lengths counted from text hold no special token where 4 others do (decoded with them, as OpenRLHF "
        "hands a response to its reward function, and counted whole): those without one were cut at the generation "
        "cap, exact")
    import polars as pl

    history = pl.read_parquet(tmp_path / "h.parquet").sort("prompt_id", "response_tokens")
    assert history.rows() == [(f"q{i}", n, None, 0, "lengths.jsonl") for i in range(4) for n in (i + 2, i + 3)]


def test_the_emulator_writes_its_log_atomically(tmp_path, monkeypatch):
    """emulate_rollouts.py wrote a fixed ``.NAME.tmp`` that a failed or interrupted write left behind (and two runs
    shared), and renamed it over a symlinked output, replacing the link; asp's own outputs do neither."""
    import polars as pl

    from asp_cli import ScheduleSettings, schedule
    from util import make_prompts, write_jsonl

    spec = importlib.util.spec_from_file_location("emulate_rollouts", REPO / "examples" / "emulate_rollouts.py")
    emulator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(emulator)
    data = write_jsonl(tmp_path / "prompts.jsonl", make_prompts(8))
    made = tmp_path / "s.parquet"
    schedule([data], made, settings=ScheduleSettings(instances=2, train_batch_size=4, samples_per_prompt=2))
    out = tmp_path / "out"
    out.mkdir()
    (out / "real.jsonl").write_text("old\n")
    (out / "r.jsonl").symlink_to("real.jsonl")
    assert emulator.main([str(made), "-o", str(out / "r.jsonl")]) == 0
    assert (out / "r.jsonl").is_symlink() and pl.read_ndjson(out / "real.jsonl").height == 16
    assert sorted(p.name for p in out.iterdir()) == ["r.jsonl", "real.jsonl"]

    def half_written(self, path):
        with open(path, "w") as handle:
            handle.write('{"prompt_id": ')
        raise KeyboardInterrupt

    monkeypatch.setattr(pl.DataFrame, "write_ndjson", half_written)
    with pytest.raises(KeyboardInterrupt):
        emulator.main([str(made), "-o", str(out / "new.jsonl")])
    assert sorted(p.name for p in out.iterdir()) == ["r.jsonl", "real.jsonl"]


def test_the_emulator_reads_and_writes_under_a_folder_named_tilde_as_named(tmp_path, monkeypatch):
    """Under a folder really named ~ (`-o '~/r.jsonl'`), Polars, handed the relative name, expanded its ~: the log's
    temporary file was written into $HOME and left there, and the rename raised FileNotFoundError (a traceback); a
    schedule so named was read from $HOME. Both are the working directory's, as asp's own are (E126)."""
    from asp_cli import ScheduleSettings, schedule
    from util import make_prompts, write_jsonl

    spec = importlib.util.spec_from_file_location("emulate_rollouts", REPO / "examples" / "emulate_rollouts.py")
    emulator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(emulator)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    (work / "~").mkdir(parents=True)
    monkeypatch.chdir(work)
    data = write_jsonl(work / "prompts.jsonl", make_prompts(8))
    schedule([data], work / "~" / "s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=4,
                                                                         samples_per_prompt=2))
    assert emulator.main(["~/s.parquet", "-o", "~/r.jsonl"]) == 0
    assert sorted(p.name for p in (work / "~").iterdir()) == ["r.jsonl", "s.parquet"]
    assert not list(home.iterdir())


def test_the_emulator_stopped_by_sigterm_leaves_no_temporary_file(tmp_path):
    """SIGTERM (a job's time limit; examples/pipeline.sh under Slurm) killed emulate_rollouts.py on the spot, its
    log's temporary file left beside the log, where its docstring says an interrupted write removes it: SIGTERM and
    SIGHUP now stop it as Ctrl-C does."""
    import subprocess
    import sys

    code = ("import os, sys, time; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import emulate_rollouts "
            "as e; e.stop_on_signals(); e.write_atomically(Path(sys.argv[2]), lambda tmp: (tmp.write_text('{'), "
            "os.kill(os.getpid(), 15), time.sleep(30)))")
    done = subprocess.run([sys.executable, "-c", code, str(REPO / "examples"), str(tmp_path / "r.jsonl")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []



def test_the_slime_hook_calls_the_users_own_custom_rm_path(tmp_path, monkeypatch):
    """A slime newcomer with a reward function of their own (`--custom-rm-path my_rm.reward`) could not keep it: the
    hook took --custom-rm-path and computed slime's --rm-type rule. $ASP_CUSTOM_RM_PATH names theirs, which slime's
    dispatch (v0.3.1 async_rm and batched_async_rm: custom_rm_path first) then calls; naming the hook itself is refused."""
    seen = []

    async def async_rm(args, sample, **kwargs):  # slime's dispatch: the custom path where set, else the rule
        seen.append(args.custom_rm_path)
        return 0.25 if args.custom_rm_path == "my_rm.reward" else 1.0

    async def batched_async_rm(args, samples, **kwargs):
        seen.append(args.custom_rm_path)
        return [0.25 if args.custom_rm_path == "my_rm.reward" else 1.0 for _ in samples]

    module = _slime_hook(monkeypatch, tmp_path, async_rm, batched_async_rm)
    args = SimpleNamespace(custom_rm_path="slime_length_log.reward_func", rm_type=None)
    sample = SimpleNamespace(metadata={"prompt_id": "3"}, response_length=12, status=_Status.COMPLETED)
    monkeypatch.setenv("ASP_CUSTOM_RM_PATH", "my_rm.reward")
    assert asyncio.run(module.reward_func(args, sample)) == 0.25
    assert asyncio.run(module.reward_func(args, [sample, sample])) == [0.25, 0.25]
    assert seen == ["my_rm.reward", "my_rm.reward"] and args.custom_rm_path == "slime_length_log.reward_func"
    assert len((tmp_path / "lengths.jsonl").read_text().splitlines()) == 3
    monkeypatch.setenv("ASP_CUSTOM_RM_PATH", "slime_length_log.reward_func")
    with pytest.raises(RuntimeError, match="names this hook: name your own reward function there"):
        asyncio.run(module.reward_func(args, sample))
    monkeypatch.delenv("ASP_CUSTOM_RM_PATH")
    assert asyncio.run(module.reward_func(args, sample)) == 1.0 and seen[-1] is None  # slime's rule, as before
