"""Every row of docs/errors.md, tested: the command, its exit code, and the words of its one-line message."""

from __future__ import annotations

import json
import os
import re
import signal
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from asp_cli.cli.main import app

from asp_cli.schedule_format import read_schedule

from util import REPO, SAMPLE_PROMPTS, Paused, asp_command, write_jsonl

runner = CliRunner()
GOOD = [{"id": "a", "question": "What is 2+2?"}, {"id": "b", "question": "Prove that there are infinitely many primes."}]


def setup_files(tmp: Path) -> None:
    import pyarrow as pa

    write_jsonl(tmp / "good.jsonl", GOOD)
    (tmp / "malformed.jsonl").write_text('{"question": "a"}\n{"question": \n{"question": "c"}\n')
    (tmp / "empty.jsonl").write_text("")
    write_jsonl(tmp / "nocolumn.jsonl", [{"text": "hi", "label": 1}])
    write_jsonl(tmp / "notext.jsonl", [{"question": "a"}, {"question": {"x": 1}}])
    write_jsonl(tmp / "dupes.jsonl", [{"id": "x", "question": "a"}, {"id": "x", "question": "b"}])
    write_jsonl(tmp / "exported.jsonl", [{"question": "a", "asp_meta": {"prompt_id": "0", "epoch": 0, "instance": 0,
                                                                 "minibatch": 0, "seq": 0, "train_step": 0}}])
    (tmp / "latin1.jsonl").write_bytes('{"question": "café"}\n'.encode("latin-1"))
    (tmp / "surrogate.jsonl").write_text('{"question": "bad \\ud800 text"}\n{"question": "fine"}\n')
    (tmp / "dupkey.jsonl").write_text('{"id": "a", "question": "one", "question": "two"}\n')
    write_jsonl(tmp / "flat.jsonl", [{"question": "q", "extra_info.index": 1, "extra_info": {"index": 2}}])
    (tmp / "zeros.jsonl").write_text('{"id": "a", "response_tokens": 0}\n{"id": "b", "response_tokens": 0}\n')
    write_jsonl(tmp / "dump_empty.jsonl", [{"input": f"user\n{row['question']}\nassistant\n", "output": "",
                                            "score": 1.0, "step": 1} for row in GOOD])
    pq.write_table(pa.table({"id": ["a", "b"], "question": ["q1", "q2"],
                             "images": [[{"bytes": b"\x89PNG", "path": None}]] * 2}), tmp / "images.parquet")
    (tmp / "fake.parquet").write_text('{"question": "a"}\n')
    import gzip

    (tmp / "gzipped.jsonl").write_bytes(gzip.compress(b'{"prompt_id": "a", "response_tokens": 5}\n', mtime=0))
    (tmp / "prompts.txt").write_text("hello\n")
    (tmp / "data.arrow").write_bytes(b"ARROW1\x00\x00")
    (tmp / "data_packed_input_ids_document.bin").write_bytes(b"\x01\x00\x00\x00" * 4)
    (tmp / "arrow.parquet").write_bytes(b"\xff\xff\xff\xff\x10\x00\x00\x00ARROW stream")
    (tmp / "prompts_dir").mkdir()
    (tmp / "rollouts").mkdir()  # verl's trainer.rollout_data_dir: one {step}.jsonl a step
    for step in (1, 2, 10):
        write_jsonl(tmp / "rollouts" / f"{step}.jsonl", [{"input": "user\nWhat is 7 times 8?\nassistant\n",
                                                         "output": "56", "score": 1.0, "step": step}])

    pq.write_table(pa.table({"seq": [0], "prompt_id": ["a"]}).replace_schema_metadata({b"asp.schedule": b"{}"}),
                   tmp / "schedule.parquet")
    (tmp / "s\udcfe.parquet").write_bytes((tmp / "schedule.parquet").read_bytes())  # a name that is not UTF-8
    pq.write_table(pa.table({"prompt_id": ["a"], "response_tokens": [5]}).replace_schema_metadata(
        {b"asp.history": b'{"logs": []}'}), tmp / "hist.parquet")
    write_jsonl(tmp / "huge.jsonl", [{"id": "big", "question": "word " * 4000}])
    write_jsonl(tmp / "giant.jsonl", [{"id": "giant", "question": "word " * 1_000_000}, {"id": "b", "question": "r"}])
    write_jsonl(tmp / "hist_negative.jsonl", [{"prompt_id": "a", "response_tokens": -5}])
    write_jsonl(tmp / "hist_missing.jsonl", [{"prompt_id": "a", "response_tokens": 5}, {"prompt_id": "b"}])
    write_jsonl(tmp / "hist_fraction.jsonl", [{"prompt_id": "a", "response_tokens": 12.5}])
    write_jsonl(tmp / "hist_epoch.jsonl", [{"prompt_id": "a", "response_tokens": 5, "epoch": 0},
                                           {"prompt_id": "b", "response_tokens": 5, "epoch": -1}])
    write_jsonl(tmp / "hist_noid.jsonl", [{"who": "a", "response_tokens": 5}])
    write_jsonl(tmp / "log_nolength.jsonl", [{"prompt_id": "a", "foo": 5}])
    write_jsonl(tmp / "input_lengths.jsonl", [{"input": "user\nWhat is 2 + 2?\nassistant\n", "response_length": 7}])
    write_jsonl(tmp / "text_log.jsonl", [{"input": f"<|im_start|>user\n{row['question']}<|im_end|>\n", "output": "4"}
                                         for row in GOOD])  # examples/openrlhf_length_log.py's
    write_jsonl(tmp / "log_strangers.jsonl", [{"prompt_id": "zz", "response_tokens": 5}])
    write_jsonl(tmp / "log_mostly.jsonl", [{"prompt_id": p, "response_tokens": 5} for p in ("a", "zz", "zy")])
    write_jsonl(tmp / "log_twice.jsonl", [{"prompt_id": "a", "sample": 0, "response_tokens": 5}] * 2)
    write_jsonl(tmp / "log_spaced.jsonl", [{"prompt_id": "a ", "response_tokens": 5}, {"prompt_id": " b", "response_tokens": 9}])
    (tmp / "notmodel.skops").write_text("not a model")
    (tmp / "cal.json").write_text('{"eta_bandwidth": "fast"}')
    (tmp / "exists.parquet").write_text("old")
    os.mkfifo(tmp / "fifo.parquet")
    (tmp / "deep.jsonl").write_text('{"id": "a", "question": "q"}\n{"id": "b", "question": "r", "x": '
                                    + "[" * 1000 + "]" * 1000 + "}\n")
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    (tmp / "bomb.jsonl.gz").write_bytes(header + zlib.compress(b"\0" * (64 << 20), 9)[2:-4] + b"\x00" * 8)
    (tmp / "nan.json").write_text('{"eta_bandwidth": NaN}')
    write_jsonl(tmp / "floatid.jsonl", [{"id": "a", "question": "q"}, {"id": 1.5, "question": "r"}])
    write_jsonl(tmp / "nul.jsonl", [{"id": "a", "question": "q", "\x00line": 5}])
    (tmp / "cat.csv").write_text("id,question\na,What is 2+2?\nid,question\nb,Why?\n")
    (tmp / "emptydir").mkdir()
    write_jsonl(tmp / "hard.jsonl", [{"id": "a", "question": "q", "difficulty": "Level 3"},
                                     {"id": "b", "question": "r", "difficulty": 1e12}])


def run(tmp: Path, *args: str):
    return runner.invoke(app, [a.replace("{tmp}", str(tmp)) for a in args])


# id, command arguments, exit code, words the message must contain.
# E129's words, said alike of every input named "-" or /dev/stdin.
FROM_STDIN = ("asp reads its inputs from files, not standard input (it reads each more than once); write it to a file "
              "first and name that")

CASES = [
    ("E01", ["schedule", "{tmp}/malformed.jsonl", "-o", "{tmp}/o.parquet"], 3, "malformed.jsonl:2: malformed JSON"),
    ("E02", ["schedule", "{tmp}/malformed.jsonl", "-o", "{tmp}/o.parquet", "--on-bad-row", "skip"], 0,
     "skipped 1 bad row (--on-bad-row skip)"),
    ("E03", ["schedule", "{tmp}/empty.jsonl", "-o", "{tmp}/o.parquet"], 3, "the file is empty"),
    ("E04", ["schedule", "{tmp}/nocolumn.jsonl", "-o", "{tmp}/o.parquet"], 3, "columns are: text, label"),
    ("E04", ["schedule", "{tmp}/good.jsonl", "{tmp}/hist.parquet", "-o", "{tmp}/o.parquet"], 3,  # --history forgotten
     "hist.parquet: holds response lengths ('response_tokens') but no prompt column (looked for prompt, messages, "
     "question, problem, instruction, input): a rollout log or history, not prompts; give it with --history"),
    ("E05", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--prompt-key", "body"], 3,
     "no column 'body' (from --prompt-key)"),
    ("E06", ["schedule", "{tmp}/notext.jsonl", "-o", "{tmp}/o.parquet"], 3,
     "notext.jsonl:2: column 'question' is not text or a chat-message list"),
    ("E07", ["schedule", "{tmp}/dupes.jsonl", "-o", "{tmp}/o.parquet"], 3, "duplicate prompt id 'x'"),
    ("E08", ["schedule", "{tmp}/latin1.jsonl", "-o", "{tmp}/o.parquet"], 3, "not valid UTF-8"),
    ("E68", ["schedule", "{tmp}/surrogate.jsonl", "-o", "{tmp}/o.parquet"], 3,
     "surrogate.jsonl:1: holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair), which is no "
     "character; fix the row, or pass --on-bad-row skip"),
    ("E09", ["schedule", "{tmp}/fake.parquet", "-o", "{tmp}/o.parquet"], 3,
     "the name says Parquet but the file looks like JSON lines; rename it to match its content (fake.jsonl)"),
    ("E09", ["observe", "{tmp}/gzipped.jsonl", "-o", "{tmp}/h.parquet"], 3,  # the name to give it: it named none
     "gzipped.jsonl: the name says JSON lines but the file looks like gzip data; rename it to match its content "
     "(gzipped.jsonl.gz)"),
    ("E10", ["schedule", "{tmp}/prompts.txt", "-o", "{tmp}/o.parquet"], 3, "unknown file type '.txt'"),
    # MindSpeed-RL's preprocessed data, given as prompts by a MindSpeed-RL newcomer, was told to rename it.
    ("E10", ["schedule", "{tmp}/data_packed_input_ids_document.bin", "-o", "{tmp}/o.parquet"], 3,
     "data_packed_input_ids_document.bin: unknown file type '.bin'; asp reads no Megatron indexed datasets (.bin/.idx, "
     "what MindSpeed-RL's and Megatron's preprocessing write: token ids, not text): give the file they were made from "
     "(the data config's input)"),
    ("E10", ["schedule", "{tmp}/data.arrow", "-o", "{tmp}/o.parquet"], 3,  # a Hugging Face datasets file
     "data.arrow: unknown file type '.arrow'; asp reads no Arrow files: write it as Parquet first "
     "(datasets.Dataset.from_file('data.arrow').to_parquet('train.parquet'))"),
    ("E09", ["schedule", "{tmp}/arrow.parquet", "-o", "{tmp}/o.parquet"], 3,  # no name guessed for what it is not
     "arrow.parquet: the name says Parquet but the file looks like text (CSV?); rename it to match its content\n"),
    ("E11", ["schedule", "{tmp}/missing.jsonl", "-o", "{tmp}/o.parquet"], 3, "no such file"),
    ("E63", ["schedule", "{tmp}/prompts_dir", "-o", "{tmp}/o.parquet"], 3, "prompts_dir: is a folder; name the files in it"),
    ("E140", ["observe", "{tmp}/rollouts/1.jsonl", "-o", "{tmp}/h.parquet", "--dataset", "{tmp}/good.jsonl"], 3,
     "rollouts/1.jsonl:1: its input matches no dataset prompt (its one row does not match any of the 2 prompts of "),
    # A verl dump observed with --id-key was read as a rollout log and called "a prompt file" (before 2026-12-08).
    ("E147", ["observe", "{tmp}/rollouts/1.jsonl", "-o", "{tmp}/h.parquet", "--id-key", "step"], 3,
     "rollouts/1.jsonl: --id-key step names 'step', the training step verl writes into every rollout dump, not a "
     "prompt id; drop --id-key: a dump of text is matched to the --dataset's prompts"),
    ("E141", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/rollouts"], 3,
     "rollouts: is a folder of 3 verl rollout dumps (1.jsonl to 10.jsonl, one a step, as trainer.rollout_data_dir "
     "holds them: input/output text, no prompt ids); turn them into lengths first: asp observe "),
    ("E141", ["schedule", "{tmp}/rollouts", "-o", "{tmp}/o.parquet"], 3,  # as prompts: not told to pass a history
     "holds them: input/output text, no prompt ids): a run's outputs, not prompts; give the prompt file(s) the run "
     "read (verl's data.train_files), and to feed the dumps back as lengths: asp observe "),
    ("E04", ["schedule", "{tmp}/rollouts/1.jsonl", "-o", "{tmp}/o.parquet"], 3,  # one dump: scheduled, unsaid
     "rollouts/1.jsonl: holds a verl rollout dump's columns (input, output, score, step): a run's outputs, not "
     "prompts; give the prompt file(s) the run read (verl's data.train_files), and to feed the dump back as lengths: "
     "asp observe "),
    ("E141", ["observe", "{tmp}/rollouts", "-o", "{tmp}/h.parquet"], 3,
     "rollouts: is a folder of 3 verl rollout dumps (1.jsonl to 10.jsonl, one a step, as trainer.rollout_data_dir "
     "holds them: input/output text, no prompt ids); name its files, not the folder: asp observe "),
    ("E102", ["schedule", "{tmp}/exported.jsonl", "-o", "{tmp}/o.parquet"], 3,
     "exported.jsonl: an asp export (its rows are a dataset's prompts in a schedule's order, with asp's columns "
     "added), not the prompt file(s) the schedule was made from; give that file instead (each prompt once, in its own "
     "order)"),
    ("E102", ["probe", "{tmp}/exported.jsonl", "-o", "{tmp}/p.jsonl"], 3,
     "exported.jsonl: an asp export (its rows are a dataset's prompts in a schedule's order, with asp's columns "
     "added), not the prompt file(s) the schedule was made from; give that file instead (each prompt once, in its own "
     "order)"),
    ("E64", ["schedule", "{tmp}/schedule.parquet", "-o", "{tmp}/o.parquet"], 3,
     "schedule.parquet: this is an asp schedule, not a file of prompts or lengths"),
    ("E22", ["export", "{tmp}/good.jsonl", "{tmp}/schedule.parquet", "-o", "{tmp}/o.jsonl"], 6,  # in the wrong order
     "schedule.parquet is one: the files are in the wrong order; give the schedule first: asp export "),
    ("E12", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--instances", "0"], 4,
     "--instances must be a whole number from 1 to 100000"),
    ("E13", ["schedule", "{tmp}/huge.jsonl", "-o", "{tmp}/o.parquet", "--max-tokens-per-minibatch", "1000"], 4,
     "is smaller than one prompt: prompt id 'big'"),
    ("E13", ["schedule", "{tmp}/giant.jsonl", "-o", "{tmp}/o.parquet"], 4,  # raising the budget would not do
     "engine's KV cache holds (955113 tokens): drop or shorten that prompt, or give a --preset whose cache holds it"),
    ("E14", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--on-bad-row", "maybe"], 4,
     "--on-bad-row must be 'error' or 'skip'"),
    ("E14", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--engine", "foo"], 4,
     "--engine must be one of continuous, static, streaming (got 'foo')"),
    ("E14", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--trainer", "sync"], 4,
     "--trainer must be one of arrival, schedule (got 'sync')"),
    ("E15", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--preset", "{tmp}/cal.json"], 4,
     "field 'eta_bandwidth' must be a non-negative number"),
    ("E16", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/hist_negative.jsonl"], 3,
     "column 'response_tokens' is negative"),
    ("E17", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/hist_missing.jsonl"], 3,
     "hist_missing.jsonl:2: column 'response_tokens' is missing"),
    ("E18", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/hist_fraction.jsonl"], 3,
     "is not a whole token count (12.5)"),
    ("E60", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/hist_epoch.jsonl"], 3,
     "hist_epoch.jsonl:2: column 'epoch' is not an epoch number (-1; epochs count 0, 1, 2, ...) for prompt id 'b'"),
    ("E61", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--kv-budget", "peak", "--engine", "static"], 4,
     "--kv-budget peak does not apply to --engine static"),
    ("E12", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--samples-per-prompt", "5000"], 4,
     "--samples-per-prompt 5000 is not a GRPO group; give at most 4096"),
    ("E62", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--engine", "streaming", "--samples-per-prompt",
             "4096", "--epochs", "100000"], 4,
     "a plan for --engine streaming replays every sequence: 200,000 groups x 4,096 samples is 819,200,000 "
     "sequences, more than the 100,000,000 asp replays at once"),
    ("E66", ["observe", "{tmp}/log_nolength.jsonl", "-o", "{tmp}/h.parquet"], 3,
     "log_nolength.jsonl: no response length column found (looked for response_tokens, response_length, "
     "completion_tokens"),
    ("E66", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/good.jsonl"], 3,
     "good.jsonl: holds prompts but no response lengths (looked for response_tokens, "),
    ("E67", ["observe", "{tmp}/log_strangers.jsonl", "-o", "{tmp}/h.parquet", "--dataset", "{tmp}/good.jsonl"], 3,
     "nothing to write: the one row was left out because its prompt id ('zz') is not in the "
     "dataset"),
    ("E95", ["observe", "{tmp}/log_mostly.jsonl", "-o", "{tmp}/o.parquet", "--dataset", "{tmp}/good.jsonl"], 3,
     "log_mostly.jsonl: 2 of its 3 rows (2 ids, e.g. 'zz') name no prompt of the dataset ("),
    ("E95", ["observe", "{tmp}/log_mostly.jsonl", "-o", "{tmp}/o.parquet", "--dataset", "{tmp}/good.jsonl",
             "--unknown-ids", "skip"], 0,
     "2 rows (2 ids, e.g. 'zz') name prompts the dataset does not hold; left out (--unknown-ids): 67% of the log"),
    ("E66", ["observe", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet"], 3,
     "good.jsonl: holds prompts but no response lengths (looked for response_tokens, "),
    ("E103", ["observe", "{tmp}/text_log.jsonl", "-o", "{tmp}/h.parquet"], 3,  # it said "a verl generation dump"
     "text_log.jsonl: input/output text without prompt ids (verl's rollout dump, OpenRLHF's or slime's length log); "
     "pass --dataset with the prompt file(s) the rollouts read, so asp can match inputs to prompts"),
    # A MindSpeed-RL newcomer's log of each sample's decoded prompt and token count was told to name an id column.
    ("E116", ["observe", "{tmp}/input_lengths.jsonl", "-o", "{tmp}/h.parquet", "--dataset", "{tmp}/good.jsonl"], 3,
     "input_lengths.jsonl: prompt text ('input') and response lengths without prompt ids: asp matches a log's prompt "
     "text to the --dataset prompts only in a dump of input/output text; log each sample's response text as 'output' "
     "beside its input (asp observe --dataset counts it), or its prompt id beside its length"),
    # A Slurm user's quoted ~ (the shell leaves it as it is) was "no such file" of a file that was there.
    ("E125", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "~/asp-e125/h.parquet"], 3,
     "~/asp-e125/h.parquet: no such file; the shell expands ~ only outside quotes, and asp takes the name as given (a "
     "folder named ~): write "),
    ("E126", ["schedule", "{tmp}/good.jsonl", "-o", "~/asp-e126/o.parquet"], 7,
     "folder ~/asp-e126 does not exist; the shell expands ~ only outside quotes, and asp takes the name as given (a "
     "folder named ~): write "),
    # A file name of bytes that are not UTF-8 (an ops round): a whole schedule was "unreadable", and an output exit 70.
    ("E127", ["report", "{tmp}/s\udcfe.parquet"], 3,
     "s\\udcfe.parquet: the name is not valid UTF-8, which the Parquet library asp reads and writes with cannot take; "
     "rename it, or link to it under a UTF-8 name (ln -s)"),
    ("E128", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o\udcfe.parquet"], 7,
     "o\\udcfe.parquet: the name is not valid UTF-8, which the Parquet library asp reads and writes with cannot take; "
     "give a UTF-8 name"),
    # `cat prompts.jsonl | asp schedule - ...` (an ops round) was told to name "-" .jsonl.
    ("E129", ["schedule", "-", "-o", "{tmp}/o.parquet"], 3,
     f"-: {FROM_STDIN}"),
    ("E129", ["report", "-"], 3,
     f"-: {FROM_STDIN}"),
    ("E129", ["observe", "-", "-o", "{tmp}/h.parquet"], 3,
     f"-: {FROM_STDIN}"),
    # --predictions - was "-: no such file" (the output check's look for missing inputs came first).
    ("E129", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--predictions", "-"], 3,
     f"-: {FROM_STDIN}"),
    ("E129", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "/dev/stdin"], 3,
     f"/dev/stdin: {FROM_STDIN}"),
    # A preset, model, tokenizer or timeline file named so said "unknown hardware preset '-'" or "no such file": each
    # says E129's line with its own exit code (a hostile round).
    ("E129", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--preset", "-"], 4,
     f"--preset -: {FROM_STDIN}"),
    ("E129", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--predictor", "-"], 5,
     f"-: {FROM_STDIN}"),
    ("E129", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--tokenizer", "/dev/stdin"], 3,
     f"--tokenizer /dev/stdin: {FROM_STDIN}"),
    ("E129", ["calibrate", "-", "-o", "{tmp}/p.json"], 3,
     f"-: {FROM_STDIN}"),
    ("E116", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/input_lengths.jsonl"], 3,
     "input_lengths.jsonl: prompt text ('input') and response lengths without prompt ids: asp matches a log's prompt "
     "text to the --dataset prompts only in a dump of input/output text"),
    ("E103", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/text_log.jsonl"], 3,
     "text_log.jsonl: holds response text without prompt ids (a verl, OpenRLHF or slime rollout dump?); turn it into "
     "lengths first: asp observe "),
    ("E66", ["observe", "{tmp}/log_mostly.jsonl", "-o", "{tmp}/h.parquet", "--dataset", "{tmp}/good.jsonl",
             "{tmp}/dupes.jsonl"], 3,  # a second prompt file after one --dataset (a shell glob) is read as a log
     "dupes.jsonl: a prompt file among the rollout logs (prompts, no response lengths): --dataset takes one file, and "
     "the files after it are read as logs; repeat it for each prompt file"),
    ("E19", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/hist_noid.jsonl"], 3,
     "no prompt id column found"),
    ("E20", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--predictor", "{tmp}/notmodel.skops"], 5,
     "not an asp predictor file"),
    ("E21", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--predictor", "{tmp}/nomodel.skops"], 5,
     "no such model file"),
    ("E24", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/exists.parquet"], 7, "exists; pass --force to replace it"),
    ("E25", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/good.jsonl", "--force"], 7, "is also an input"),
    ("E26", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/nowhere/o.parquet"], 7, "does not exist; create it first"),
    ("E27", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--no-such-flag"], 2, "No such option"),
    # A MindSpeed-RL newcomer's megatron_training.global_batch_size was offered --minibatch-size first.
    ("E115", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--global-batch-size", "32"], 2,
     "No such option: --global-batch-size; prompts (groups) per training step are --train-batch-size: MindSpeed-RL's "
     "and Megatron's global_batch_size; slime's --global-batch-size counts samples, its --rollout-batch-size prompts"),
    ("E115", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--max-tokens", "2048"], 2,
     "No such option: --max-tokens; the generation cap is --max-response-tokens: vLLM's max_tokens "
     "(MindSpeed-RL's generate_config.sampling_config.max_tokens); a minibatch's token budget is "
     "--max-tokens-per-minibatch\n"),
    ("E115", ["export", "{tmp}/good.jsonl", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--max-tokens", "2048"], 2,
     "No such option: --max-tokens\n"),
    ("E72", ["schedule", "{tmp}/good.jsonl", "-o", ""], 2,
     "Error: Invalid value for '--output' / '-o': the path is empty; name the file to write"),
    ("E36", ["probe", "{tmp}/good.jsonl", "-o", "{tmp}/o.jsonl", "--fraction", "0"], 4,
     "--fraction must be a share of the prompts in (0, 1]"),
    ("E37", ["probe", "{tmp}/good.jsonl", "-o", "{tmp}/o.jsonl", "--prompts", "5000"], 4,
     "--prompts 5000 is more than the 2 prompts of the input"),
    ("E57", ["predictor", "predict", "{tmp}/good.jsonl", "-o", "{tmp}/preds", "--ray", "--history",
             "{tmp}/hist_missing.jsonl"], 4, "--history cannot go with --ray: the history correction is pooled"),
    ("E58", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--predictions", "{tmp}/emptydir"], 3,
     "emptydir: a folder without predictions-*.parquet files"),
    ("E32", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/fifo.parquet", "--force"], 7,
     "fifo.parquet is not a regular file (a device, pipe or socket); name a file"),
    ("E45", ["bench", "--workload", "aime-k8-n4", "--data", "{tmp}"], 3,
     "no benchmark workload could run: aime-k8-n4 needs aime_r1distill1.5b_lengths/, which does not ship"),
    ("E46", ["schedule", "{tmp}/deep.jsonl", "-o", "{tmp}/o.parquet"], 3,
     "deep.jsonl:2: JSON nested more than 100 levels deep (at column 134); asp reads at most 100 levels: flatten the "
     "field, or fix the row, or pass --on-bad-row skip to skip bad rows"),
    ("E49", ["schedule", "{tmp}/bomb.jsonl.gz", "-o", "{tmp}/o.parquet"], 3,
     "bomb.jsonl.gz: the gzip data inflates to more than 200 times its size (a decompression bomb, or data asp "
     "cannot tell from one); decompress it yourself and give the plain file"),
    ("E50", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--preset", "{tmp}/nan.json"], 4,
     "nan.json: field 'eta_bandwidth' must be a finite number in (0, 1e12] (got nan); fix the calibration file"),
    ("E53", ["schedule", "{tmp}/floatid.jsonl", "-o", "{tmp}/o.parquet"], 3,
     "floatid.jsonl:2: column 'id' (the id) is the number 1.5, not an integer; ids are text or integers: fix the row, "
     "name another column with --id-key, or pass --on-bad-row skip to skip bad rows"),
    ("E71", ["schedule", "{tmp}/nul.jsonl", "-o", "{tmp}/o.parquet"], 3,
     "nul.jsonl:1: column '\\x00line' starts with a NUL character, which asp keeps for its own columns; rename the "
     "column (or drop it)"),
    ("E75", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--prompts-per-server", "16"], 4,
     "--prompts-per-server is verl's asynchronous rollouter's limit: it needs --engine streaming and --max-lag"),
    ("E74", ["schedule", "{tmp}/cat.csv", "-o", "{tmp}/o.parquet"], 3,
     "cat.csv:3: the header line repeats here as a data row (files joined with cat?); remove the repeated header "
     "line, or pass --on-bad-row skip to skip bad rows"),
    ("E79", ["schedule", "{tmp}/dupkey.jsonl", "-o", "{tmp}/o.parquet"], 3,
     'dupkey.jsonl:1: holds the key "question" twice in one object (JSON readers differ on which value they keep); '
     "keep one; fix the row, or pass --on-bad-row skip to skip bad rows"),
    ("E80", ["probe", "{tmp}/images.parquet", "-o", "{tmp}/o.jsonl", "--prompts", "1"], 3,
     "images.parquet: column 'images' (images[].bytes) holds binary data (images or audio as bytes), which JSON "
     "lines cannot hold; write Parquet (an output ending .parquet, or --format parquet / verl)"),
    ("E81", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--verl-trainer", "colocate-async"], 4,
     "--verl-trainer colocate-async is one of verl's asynchronous trainers, which run on servers a warm-up ahead: "
     "add --engine streaming and --max-lag equal to trainer.v1.colocate_async.num_warmup_batches (1 by default), or "
     "drop it"),
    ("E81", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--engine", "streaming", "--max-lag", "0.1",
             "--train-batch-size", "8", "--verl-trainer", "separate-async"], 4,
     "--max-lag 0.1 with --verl-trainer separate-async is trainer.v1.separate_async.num_warmup_batches, a count of "
     "train batches that verl rounds down to whole prompts: 0.1 x 8 is a warm-up of none, and every step runs "
     "synchronously;"),
    ("E82", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/zeros.jsonl"], 3,
     "zeros.jsonl: every one of the 2 lengths (column 'response_tokens') is 0: the wrong column, or a rollout that "
     "wrote nothing; give response lengths in tokens, naming their column with --history-length-key"),
    ("E82", ["observe", "{tmp}/dump_empty.jsonl", "-o", "{tmp}/h.parquet", "--dataset", "{tmp}/good.jsonl"], 3,
     "dump_empty.jsonl: every one of the 2 responses (column 'output') is empty: the wrong column, or a rollout that "
     "wrote nothing; give the log of a rollout whose responses hold text"),
    ("E83", ["schedule", "{tmp}/flat.jsonl", "-o", "{tmp}/o.parquet", "--id-key", "extra_info.index"], 3,
     "flat.jsonl: 'extra_info.index' names both a column of that name and a field inside column 'extra_info'; "
     "rename one of them in the file"),
    ("E85", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/hist.parquet", "--force"], 7,
     "hist.parquet is an asp history, and asp schedule writes an asp schedule: --force replaces only a file of its "
     "own kind; name another output"),
    ("E85", ["simulate", "{tmp}/schedule.parquet", "--timeseries", "{tmp}/hist.parquet", "--force"], 7,
     "hist.parquet is an asp history, and --timeseries writes a time series: --force replaces only a file of its own "
     "kind; name another output"),
    ("E86", ["schedule", "{tmp}/hard.jsonl", "-o", "{tmp}/o.parquet"], 3,
     "hard.jsonl:2: difficulty 1e+12 (column 'difficulty') is beyond any level or rating (asp reads at most 1e+06 in "
     "size); name another column with --difficulty-key, or fix the row, or pass --on-bad-row skip to skip bad rows"),
    ("E87", ["observe", "{tmp}/log_spaced.jsonl", "-o", "{tmp}/h.parquet", "--dataset", "{tmp}/good.jsonl"], 3,
     "nothing to write: all 2 rows were left out because their prompt ids (2 ids, e.g. 'a ', ' b') are not in the "
     "dataset; 2 of them differ from an id in the dataset only by spaces around it, e.g. 'a ' in the log and 'a' in "
     "the dataset: write the ids alike in both files"),
    # The words before the value are Typer's own (its version's): the value is asp's part.
    ("E90", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--instances", "abc"], 2, "(got 'abc')"),
    ("E89", ["observe", "{tmp}/log_twice.jsonl", "-o", "{tmp}/h.parquet"], 3,
     "log_twice.jsonl:2: prompt id 'a' sample 0 again, of the same length (column 'sample'; first at line 1), 1 such "
     "repeat in all: the same samples logged twice would count twice; keep each once, or pass --on-bad-row skip to "
     "keep the first of each"),
    ("E98", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--router", "cache-aware"], 4,
     "--router cache-aware is how servers that refill place requests: add --engine streaming, or drop it"),
    ("E98", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--engine", "streaming", "--router",
             "group-round-robin", "--max-lag", "2", "--trainer", "schedule"], 4,
     "--router group-round-robin deals a batch's groups to the servers in turn: with --trainer schedule it is "
     "OpenRLHF's, at --max-lag 0 (synchronous, its default) or 1"),
    ("E98", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--engine", "streaming", "--router",
             "cache_aware"], 4, "(got 'cache_aware'); did you mean cache-aware?"),
    ("E54", ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet/"], 7,
     "o.parquet/ ends with '/', so it names a folder; name the output file without the slash"),
]


@pytest.mark.parametrize("case_id, args, code, words", CASES, ids=[c[0] for c in CASES])
def test_error_row(tmp_path, case_id, args, code, words):
    setup_files(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    result = run(tmp_path, *args)
    assert result.exit_code == code, (case_id, result.stderr)
    assert words in result.stderr, (case_id, result.stderr)
    assert result.stdout == ""
    if code != 0:
        # One line, no traceback, no output file, inputs untouched.
        assert "Traceback" not in result.stderr
        if code != 2:
            assert result.stderr.startswith("Error: ") and result.stderr.strip().count("\n") == 0
        assert not (tmp_path / "o.parquet").exists()
        after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        assert after == before


def _schedule(tmp_path: Path) -> Path:
    out = tmp_path / "s.parquet"
    assert runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(out)]).exit_code == 0
    return out


@pytest.mark.parametrize("case_id", ["E22", "E23", "E35"])
def test_error_row_schedule_files(tmp_path, case_id):
    if case_id == "E35":
        import polars as pl

        target = _schedule(tmp_path)
        table = pq.read_table(target)
        edited = pl.from_arrow(table).with_columns(pl.col("expected_finish_s").cast(pl.String))
        pq.write_table(edited.to_arrow().replace_schema_metadata(table.schema.metadata), target)
        words = "column 'expected_finish_s' is String, expected Float64; drop the column or write the schedule again"
    elif case_id == "E22":
        target = tmp_path / "plain.parquet"
        import polars as pl

        pl.DataFrame({"a": [1]}).write_parquet(target)
        words = "not an asp schedule"
    else:
        target = _schedule(tmp_path)
        table = pq.read_table(target)
        meta = json.loads(table.schema.metadata[b"asp.schedule"])
        meta["format_version"] = "9.0"
        pq.write_table(table.replace_schema_metadata({b"asp.schedule": json.dumps(meta).encode()}), target)
        words = "newer than this asp reads"
    commands = [["simulate", str(target)], ["report", str(target)], ["export", str(target), str(SAMPLE_PROMPTS),
                                                                      "-o", str(tmp_path / "x.parquet")]]
    known = {c.name for c in app.registered_commands}
    tried = 0
    for command in commands:
        if command[0] not in known:
            continue
        tried += 1
        result = runner.invoke(app, command)
        assert result.exit_code == 6, (command, result.stderr)
        assert words in result.stderr
    assert tried, "no command reads schedules"


def test_error_row_text_log_with_a_schedule_whose_file_is_not_found(tmp_path):
    """E103 with --schedule: the file the schedule was made from, named (since 2026-12-07; before, --dataset was
    asked for without a word of which file; found with its bytes, it is read)."""
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"question": f"q {i}"} for i in range(8)])
    assert runner.invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s.parquet"), "--train-batch-size",
                               "4", "--quiet"]).exit_code == 0
    log = write_jsonl(tmp_path / "text_log.jsonl", [{"input": "user: q 1", "output": "four"}])
    prompts.unlink()
    result = runner.invoke(app, ["observe", str(log), "-o", str(tmp_path / "h.parquet"), "--schedule",
                                 str(tmp_path / "s.parquet")])
    assert result.exit_code == 3 and result.stderr.startswith("Error: ") and result.stderr.strip().count("\n") == 0
    assert ("text_log.jsonl: input/output text without prompt ids (verl's rollout dump, OpenRLHF's or slime's length "
            "log); the schedule was made from p.jsonl, not found beside it or here with the bytes it recorded: pass "
            "--dataset p.jsonl (where each is now)") in result.stderr, result.stderr


@pytest.mark.parametrize("case_id", ["E30", "E31"])
def test_error_row_predictor_files(tmp_path, case_id):
    """E30: a predictor file of a newer format; E31: one that asks to load an untrusted type. Exit 5."""
    import zipfile
    from collections import OrderedDict

    from asp_cli.predict import model as P
    from asp_cli.predict.prediction import DEFAULT_MODEL

    setup_files(tmp_path)
    model = tmp_path / "model.skops"
    if case_id == "E30":
        with zipfile.ZipFile(DEFAULT_MODEL) as src, zipfile.ZipFile(model, "w") as dst:
            for item in src.infolist():
                data = src.read(item)
                if item.filename == P.META_MEMBER:
                    card = json.loads(data)
                    card["format_version"] = P.FORMAT_VERSION + 1
                    data = json.dumps(card).encode()
                dst.writestr(item, data)
        words = "is newer than this asp reads"
    else:
        import skops.io as sio

        sio.dump({"format_version": 1, "payload": OrderedDict(a=1)}, model)
        with zipfile.ZipFile(model, "a") as archive:
            archive.writestr(P.META_MEMBER, json.dumps({"format_version": 1}))
        words = "refused to load: the file asks for types asp does not trust"
    for command in (["schedule", str(tmp_path / "good.jsonl"), "-o", str(tmp_path / "o.parquet"), "--predictor",
                     str(model)], ["predictor", "info", str(model)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 5, (command, result.stderr)
        assert words in result.stderr and result.stderr.startswith("Error: ")
    assert not (tmp_path / "o.parquet").exists()


def test_error_row_export_name_and_format(tmp_path, monkeypatch):
    """E34: an export named .jsonl with --format parquet, or any Parquet output named otherwise: exit 4, nothing
    written. (Without --format the name chooses: JSON lines for .jsonl.)"""
    setup_files(tmp_path)
    schedule = _schedule(tmp_path)
    result = runner.invoke(app, ["export", str(schedule), str(SAMPLE_PROMPTS), "-o", str(tmp_path / "ordered.jsonl"),
                                 "--format", "parquet"])
    assert result.exit_code == 4, result.stderr
    assert "ordered.jsonl: --format parquet writes Parquet, but the name ends in '.jsonl'; name it .parquet or pass " \
           "--format jsonl" in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "ordered.jsonl").exists()
    # The same rule, in the same words, for every command that writes Parquet.
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "a", "response_tokens": 5}])
    for args, name, writer in (
        (["schedule", str(tmp_path / "good.jsonl")], "s.csv", "asp schedule"),
        (["schedule", str(tmp_path / "good.jsonl")], "schedule", "asp schedule"),
        (["observe", str(log)], "history.jsonl", "asp observe"),
        (["predictor", "predict", str(tmp_path / "good.jsonl")], "p.csv", "asp predictor predict"),
        (["export", str(schedule), str(SAMPLE_PROMPTS), "--format", "verl"], "o.csv", "--format verl"),
        (["replay", str(schedule), str(SAMPLE_PROMPTS), "--dry-run"], "t.csv", "asp replay"),
    ):
        result = runner.invoke(app, [*args, "-o", str(tmp_path / name)])
        assert result.exit_code == 4, (args, result.stderr)
        ends = f"the name ends in {Path(name).suffix!r}" if Path(name).suffix else "the name has no extension"
        assert result.stderr == f"Error: {tmp_path / name}: {writer} writes Parquet, but {ends}; name it .parquet\n"
        assert not (tmp_path / name).exists()
    # And for the other outputs whose kind their name says, so that --force cannot put a page, a table or a
    # model where a schedule was (`--html s.parquet --force` replaced the schedule with HTML).
    other = tmp_path / "other.parquet"
    other.write_bytes(schedule.read_bytes())
    steps = tmp_path / "steps.csv"
    steps.write_text("tokens,step_s\n1,1\n")
    for args, name, writer, what, fix in (
        (["report", str(schedule), "--html"], other.name, "--html", "an HTML page", ".html"),
        (["bench", "--markdown"], other.name, "--markdown", "Markdown", ".md"),
        (["predictor", "fit", str(tmp_path / "good.jsonl"), "-o"], "model.parquet", "asp predictor fit",
         "a skops model file", ".skops"),
        (["calibrate", str(steps), "-o"], "preset.txt", "asp calibrate", "a JSON preset", ".json"),
    ):
        target = tmp_path / name
        result = runner.invoke(app, [*args, str(target), "--force"])
        assert result.exit_code == 4, (args, result.stderr)
        assert result.stderr == (f"Error: {target}: {writer} writes {what}, but the name ends in "
                                 f"{Path(name).suffix!r}; name it {fix}\n")
    assert other.read_bytes() == schedule.read_bytes() and not (tmp_path / "model.parquet").exists()
    # `-o -` is no standard output: every output is a file, written atomically (a newcomer's `asp export ... -o -`
    # was told "the name has no extension; name it .jsonl"); nothing named '-' is written.
    monkeypatch.chdir(tmp_path)
    for args, writer, what, suffix in (
        (["export", str(schedule), str(SAMPLE_PROMPTS), "--format", "jsonl", "-o"], "--format jsonl", "JSON lines",
         ".jsonl"),
        (["export", str(schedule), str(SAMPLE_PROMPTS), "-o"], "--format parquet", "Parquet", ".parquet"),
        (["schedule", str(tmp_path / "good.jsonl"), "-o"], "asp schedule", "Parquet", ".parquet"),
        (["report", str(schedule), "--html"], "--html", "an HTML page", ".html"),
    ):
        result = runner.invoke(app, [*args, "-"])
        assert result.exit_code == 4, (args, result.stderr)
        assert result.stderr == (f"Error: -: {writer} writes {what}, but '-' is not standard output here: this output "
                                 "is written as a file, atomically (beside it, then renamed into place), not to "
                                 f"stdout; name a file, e.g. out{suffix}\n")
    assert not (tmp_path / "-").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc, where no file can be created")
def test_error_row_unwritable_folder(tmp_path):
    """E33: a folder that cannot take a new file (here /proc, unwritable even for root): exit 7, one line."""
    setup_files(tmp_path)
    result = run(tmp_path, "schedule", "{tmp}/good.jsonl", "-o", "/proc/asp-o.parquet")
    assert result.exit_code == 7, result.stderr
    assert result.stderr.startswith("Error: cannot write /proc/asp-o.parquet (")
    assert "check the folder's permissions and free space" in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr


def test_error_row_internal_error(monkeypatch, tmp_path):
    """E28: a bug is reported as one, with exit code 70."""
    import asp_cli.arrange.pipeline

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(asp_cli.arrange.pipeline, "schedule", broken)
    result = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(tmp_path / "o.parquet")])
    assert result.exit_code == 70
    assert "internal error (RuntimeError: boom); this is a bug in asp" in result.stderr


def test_a_rust_panic_is_reported_as_a_bug(monkeypatch, tmp_path):
    """E28: a panic inside Polars or PyArrow (pyo3's PanicException, a BaseException) is a bug too: one line, exit
    70 (it printed a Rust backtrace and a Python traceback and exited 1, the code of a failed check)."""
    import asp_cli.arrange.pipeline

    panic = type("PanicException", (BaseException,), {})

    def broken(*args, **kwargs):
        raise panic("not yet implemented: Writing BinaryView to JSON")

    monkeypatch.setattr(asp_cli.arrange.pipeline, "schedule", broken)
    result = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(tmp_path / "o.parquet")])
    assert result.exit_code == 70
    assert result.stderr.strip() == ("Error: internal error (PanicException: not yet implemented: Writing BinaryView "
                                     "to JSON); this is a bug in asp. Rerun as 'asp --traceback <command> ...' and "
                                     "report it.")


@pytest.mark.parametrize("kind", ["asp_cli.errors.Interrupted", "KeyboardInterrupt"])
def test_a_rust_panic_of_an_interrupt_is_the_interrupt_not_a_bug(monkeypatch, tmp_path, kind):
    """E29, not E28: a signal that lands in Python code Rust called (Polars' import registers its startup
    dependencies so: SIGTERM 0.5 s into `asp schedule`) raises there, and pyo3 makes it a panic. The run said
    "internal error (PanicException: ... PyErr { type: <class 'asp_cli.errors.Interrupted'> ...); this is a bug in
    asp" above its "Interrupted" line; it is the interrupt's line alone, exit 130."""
    import asp_cli.arrange.pipeline

    panic = type("PanicException", (BaseException,), {})

    def interrupted(*args, **kwargs):
        raise panic(f"called `Result::unwrap()` on an `Err` value: PyErr {{ type: <class '{kind}'>, value: "
                    "Interrupted(), traceback: None }")

    monkeypatch.setattr(asp_cli.arrange.pipeline, "schedule", interrupted)
    result = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(tmp_path / "o.parquet")])
    assert result.exit_code == 130, result.stderr
    assert result.stderr == "Interrupted; nothing was written.\n"


@pytest.mark.slow
@pytest.mark.parametrize("point", ["entry", "callback", "publish", "published"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP,  # SIGHUP: a closed session
                                 signal.SIGUSR1, signal.SIGUSR2])  # Slurm's warning before a time limit
def test_error_row_interrupted(tmp_path, sig, point):
    """E29: Ctrl-C or SIGTERM: exit 130 and one line, the previous output intact (or the new one complete),
    no temporary file left. The child stops at a pause point (`asp_cli.testhooks`): before Typer and the
    commands import, inside the option parser, with the output's temporary file complete, and with the output
    just published; the signal lands there, so the verdict never depends on timing."""
    out = tmp_path / "s.parquet"
    out.write_bytes(b"previous")
    child = Paused(asp_command("schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--force"), point)
    assert child.reached, child.wait()
    child.signal(sig)
    code, stdout, stderr = child.wait()
    assert code == 130, stderr
    assert stdout == "" and stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    if point == "published":
        assert stderr == f"Interrupted after writing {out} (complete); nothing else was written.\n"
        assert read_schedule(out).frame.height == 3540
    else:
        assert stderr == "Interrupted; nothing was written.\n"
        assert out.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["s.parquet"]


def test_error_rows_replay_and_calibrate(tmp_path, monkeypatch):
    """E38-E44: asp replay and asp calibrate against servers that fail, and their inputs (fake servers)."""
    import sys

    from fake_openai import FakeServer
    from util import make_prompts

    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    rows = make_prompts(24, seed=3)
    prompts = write_jsonl(tmp_path / "p.jsonl", rows)
    target = tmp_path / "s.parquet"
    schedule([prompts], target, settings=ScheduleSettings(instances=2, samples_per_prompt=2, minibatch_size=4,
                                                          train_batch_size=8, max_response_tokens=16))
    out = tmp_path / "t.parquet"

    def replay(*extra: str):
        return runner.invoke(app, ["replay", str(target), str(prompts), "-o", str(out), "--warmup", "0",
                                   "--retry-backoff", "0.001", *extra])

    def one_line(result, code: int, words: str) -> None:
        assert result.exit_code == code, result.output
        assert result.stderr.startswith("Error: ") and result.stderr.strip().count("\n") == 0, result.stderr
        assert words in result.stderr, result.stderr

    dead = "http://127.0.0.1:9/v1"
    one_line(replay("--servers", f"{dead},{dead}", "--retries", "0"), 8,
             f"server {dead}: GET /v1/models failed after 1 attempt (cannot connect")
    assert not out.exists()
    with FakeServer() as server:
        one_line(replay("--servers", f"{server.url},{server.url}", "--model", "other"), 8,
                 f"server {server.url} serves fake-model, not 'other'; pass --model fake-model")
        one_line(replay("--servers", server.url), 4, "the schedule plans 2 instances but --servers names 1; give one "
                 "URL per instance, or make the schedule with --instances 1")
    monkeypatch.setitem(sys.modules, "vllm", None)
    one_line(replay("--in-process", "Qwen/Qwen2.5-7B"), 4, "--in-process needs vLLM, which is not installed here")
    partial = write_jsonl(tmp_path / "partial.jsonl", rows[:-1])
    result = runner.invoke(app, ["replay", str(target), str(partial), "--dry-run"])
    one_line(result, 3, f"the dataset has no prompt with id {rows[-1]['id']!r} (1 scheduled ids are missing)")
    other = tmp_path / "other.parquet"
    import polars as pl

    pl.DataFrame({"a": [1]}).write_parquet(other)
    result = runner.invoke(app, ["calibrate", str(other), "-o", str(tmp_path / "p.json")])
    one_line(result, 3, "other.parquet: not an asp replay timeline (no column 'instance')")
    assert not out.exists() and not (tmp_path / "p.json").exists()

    # E44: the measurement stopped by Ctrl-C (the real signal is sent in test_cli_replay.py).
    import asp_cli.integrate.live as live

    def interrupted(plans, settings, **kwargs):
        outcome = live.LiveOutcome([live.RunRecord(p.requests) for p in plans], interrupted=True)
        from asp_cli.integrate.serving import Completion

        for i in range(12):
            outcome.records[0].store(i, 0, Completion(float(i), float(i) + 0.5, float(i) + 1, 3, 4, None, 1))
        return outcome

    monkeypatch.setattr(live, "run_live", interrupted)
    result = runner.invoke(app, ["replay", str(target), "--synthetic-prompts", "-o", str(out), "--servers",
                                 f"{dead},{dead}"])
    assert result.exit_code == 130, result.output
    assert result.stderr == f"Interrupted; wrote the 12 requests measured so far to {out}.\n"
    assert pq.read_table(out).num_rows == 12


def test_error_row_lengths_not_forced(tmp_path):
    """E96: a server whose answers are not the lengths asked (it drops min_tokens and ignore_eos); E97: one that
    answers a request for a stream with plain JSON."""
    from fake_openai import FakeServer, Faults
    from util import make_prompts

    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(24, seed=3))
    target = tmp_path / "s.parquet"
    schedule([prompts], target, settings=ScheduleSettings(instances=2, samples_per_prompt=2, minibatch_size=4,
                                                          train_batch_size=8, max_response_tokens=16))
    out = tmp_path / "t.parquet"
    with FakeServer(faults=Faults(reported_tokens=0)) as a, FakeServer() as b:
        result = runner.invoke(app, ["replay", str(target), str(prompts), "-o", str(out), "--warmup", "0",
                                     "--servers", f"{a.url},{b.url}", "-q"])
    assert result.exit_code == 8, result.output
    # Free dispatch (the schedule's default): how many each server answered depends on which asked first.
    assert re.match(rf"Error: server {re.escape(a.url)}: (\d+) of the \1 requests of asp it answered came back with "
                    r"another length than asked \(e\.g\. asp request seq ", result.stderr), result.stderr
    assert result.stderr.count("\n") == 1 and f"the 48 requests measured are in {out}" in result.stderr
    assert pq.read_table(out).num_rows == 48
    # E97: a server that answers a stream request with plain JSON.
    with FakeServer(faults=Faults(ignore_stream=True)) as a, FakeServer() as b:
        result = runner.invoke(app, ["replay", str(target), str(prompts), "-o", str(tmp_path / "u.parquet"),
                                     "--warmup", "0", "--servers", f"{a.url},{b.url}", "-q"])
    assert result.exit_code == 8, result.output
    assert re.match(rf"Error: server {re.escape(a.url)}: asp request seq \d+ sample \d \(prompt id '[^']+'\) was "
                    r"answered with plain JSON, not a stream \(the server ignores \"stream\": true\); pass --no-stream",
                    result.stderr), result.stderr


def test_error_row_poisoned_and_oversized_model_files(tmp_path):
    """E47: NaN weights (was exit 0 with -9.2e18 tokens); E48: a member that would inflate past the limit."""
    import struct

    import numpy as np

    from asp_cli.predict import model as P
    from asp_cli.predict.prediction import DEFAULT_MODEL

    setup_files(tmp_path)
    poisoned = P.load(DEFAULT_MODEL)
    poisoned.word_coef_ = np.full_like(poisoned.word_coef_, np.nan)
    P.save(poisoned, tmp_path / "nan.skops")
    name = b"schema.json"  # declares 3 GiB; nothing is read past the central directory
    body = b"\x03\x00"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, 0, len(body), 3 << 30, len(name), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, 0, len(body), 3 << 30, len(name),
                          0, 0, 0, 0, 0, 0) + name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(local) + len(name) + len(body), 0)
    (tmp_path / "bomb.skops").write_bytes(local + name + body + central + end)
    for model, words in (("nan.skops", "nan.skops: the model file is damaged or not an asp predictor ('word_coef' "
                                       "holds NaN or infinite values); refit it with `asp predictor fit`"),
                         ("bomb.skops", "bomb.skops: member 'schema.json' inflates to 3,221,225,472 bytes, more than "
                                        "268,435,456; it is not an asp predictor")):
        for command in (["schedule", str(tmp_path / "good.jsonl"), "-o", str(tmp_path / "o.parquet"), "--predictor",
                         str(tmp_path / model)], ["predictor", "info", str(tmp_path / model)]):
            result = runner.invoke(app, command)
            assert result.exit_code == 5 and words in result.stderr, result.stderr
            assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert not (tmp_path / "o.parquet").exists()


def test_error_row_output_written_meanwhile(tmp_path):
    """E51: two runs to one new output without --force: the one that publishes second is refused (exit 7)."""
    out = tmp_path / "s.parquet"
    first = Paused(asp_command("schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--quiet"), "publish")
    assert first.reached
    assert runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--quiet"]).exit_code == 0
    first.resume()
    assert first.wait() == (7, "", f"Error: {out} exists (written while this ran); pass --force to replace it\n")


def test_error_row_output_failure_without_errno(tmp_path, monkeypatch):
    """E52: Polars' full-disk error has no errno; a full stdout. Both exit 7, naming what could not be written."""
    import polars as pl

    schedule = _schedule(tmp_path)

    def full(*args, **kwargs):
        raise OSError("No space left on device (os error 28)")

    monkeypatch.setattr(pl.DataFrame, "write_ndjson", full)
    out = tmp_path / "e.jsonl"
    result = runner.invoke(app, ["export", str(schedule), str(SAMPLE_PROMPTS), "--format", "jsonl", "-o", str(out)])
    assert result.exit_code == 7 and result.stderr == (
        f"Error: cannot write {out} (No space left on device (os error 28)); check the folder's permissions and free "
        "space, or write somewhere else\n")
    if Path("/dev/full").exists():
        import subprocess

        with open("/dev/full", "w") as stdout:
            done = subprocess.run(asp_command("report", str(schedule), "--json"), stdout=stdout,
                                  stderr=subprocess.PIPE, text=True, timeout=300)
        assert done.returncode == 7 and done.stderr == (
            "Error: cannot write to stdout (No space left on device); free space where it goes, or send it elsewhere\n")


def test_error_row_format_version_not_major_minor(tmp_path):
    """E55: a format version that is not text "MAJOR.MINOR" (here the number 1.999) is a damaged schedule."""
    target = _schedule(tmp_path)
    table = pq.read_table(target)
    meta = json.loads(table.schema.metadata[b"asp.schedule"])
    meta["format_version"] = 1.999
    pq.write_table(table.replace_schema_metadata({b"asp.schedule": json.dumps(meta).encode()}), target)
    result = runner.invoke(app, ["report", str(target)])
    assert result.exit_code == 6 and result.stderr == (
        f"Error: {target}: damaged asp schedule metadata (format_version 1.999 is not text \"MAJOR.MINOR\" of two "
        "whole numbers); write the schedule again\n")


def test_every_documented_row_is_tested():
    table = (REPO / "docs" / "errors.md").read_text(encoding="utf-8")
    # E\d+: E99 is the last id of two digits, and a row E100 went unchecked under E\d\d
    documented = set(re.findall(r"^\| (E\d+) \|", table, flags=re.M))
    assert "E99" in documented
    tested = {c[0] for c in CASES} | {"E22", "E23", "E28", "E29", "E30", "E31", "E33", "E34", "E35"} | {
        f"E{i}" for i in range(38, 45)} | {"E47", "E48", "E51", "E52", "E55"} | {
        "E56", "E59", "E65", "E69", "E70", "E73", "E76", "E77", "E78", "E84", "E88"} | {
        "E91", "E92", "E93", "E94", "E96", "E97", "E99", "E101", "E104", "E110", "E146"}  # E56, E59 (Ray): tests/test_ray.py;
    # E88, E91-E94: below; E101: tests/test_cli_predictor.py; E104: tests/test_export.py; E69:
    # tests/test_calibrate.py; E70: tests/test_reading.py; E76, E110: tests/test_cli_simulate.py; E77:
    # tests/test_schedule_format.py; E78: tests/test_history_file.py; E84: tests/test_observe.py
    assert documented == tested


def test_error_row_verl_objects_of_mixed_kinds(tmp_path):
    """E73: a verl export of a dataset whose reward_model objects differ in kind (a ground truth as text, then as
    a number)."""
    data = write_jsonl(tmp_path / "data.jsonl", [
        {"id": "a", "question": "What is 1+1?", "reward_model": {"style": "rule", "ground_truth": "2"}},
        {"id": "b", "question": "What is 2+2?", "reward_model": {"style": "rule", "ground_truth": 4}}])
    sched = tmp_path / "s.parquet"
    assert runner.invoke(app, ["schedule", str(data), "-o", str(sched), "-q"]).exit_code == 0
    result = runner.invoke(app, ["export", str(sched), str(data), "-o", str(tmp_path / "v.parquet"),
                                 "--format", "verl"])
    assert result.exit_code == 3 and result.stderr.endswith(
        f"Error: {data}: column 'reward_model' holds objects whose field 'ground_truth' is text in some rows and a "
        "number in others, which verl's layout cannot keep (a Parquet column holds one type; its values would be "
        "replaced by defaults); give that field one kind in every row, or write --format jsonl, which keeps every "
        "row as it is\n")
    assert not (tmp_path / "v.parquet").exists()


def test_error_row_damaged_history_log_list(tmp_path):
    """E65: appending to a history whose list of observed logs is damaged."""
    write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "a", "response_tokens": 5}])
    out = tmp_path / "h.parquet"
    assert runner.invoke(app, ["observe", str(tmp_path / "log.jsonl"), "-o", str(out)]).exit_code == 0
    table = pq.read_table(out)
    pq.write_table(table.replace_schema_metadata({b"asp.history": table.schema.metadata[b"asp.history"][:-5]}), out)
    result = runner.invoke(app, ["observe", str(tmp_path / "log.jsonl"), "-o", str(out), "--append"])
    assert result.exit_code == 3
    assert result.stderr == (f"Error: {out}: damaged asp history metadata (its list of the logs already observed: not "
                             "JSON), so appending could add a log twice; write a new history from the logs (asp observe LOGS... "
                             "-o new.parquet)\n")
    # A fingerprint replaced by a list (an audit: exit 70, "unhashable type") is the same damage.
    assert runner.invoke(app, ["observe", str(tmp_path / "log.jsonl"), "-o", str(out), "--force"]).exit_code == 0
    table = pq.read_table(out)
    document = json.loads(table.schema.metadata[b"asp.history"])
    document["logs"][0]["fingerprint"] = []
    pq.write_table(table.replace_schema_metadata({b"asp.history": json.dumps(document).encode()}), out)
    result = runner.invoke(app, ["observe", str(tmp_path / "log.jsonl"), "-o", str(out), "--append"])
    assert result.exit_code == 3 and "damaged asp history metadata" in result.stderr


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
def test_a_signal_at_exit_reaching_another_thread_is_counted_not_fatal():
    """E29: after the output was complete, a Ctrl-C reached a library's thread (the main thread blocks it) while
    Python's shutdown had put SIG_DFL back in place of asp's handler: the process died of SIGINT (-2), silent."""
    import subprocess
    import sys

    code = (
        "import os, signal, sys, threading, time\n"
        "from asp_cli.cli import entry, interrupts\n"
        "interrupts.install()\n"
        "worker = threading.Thread(target=time.sleep, args=(5,), daemon=True); worker.start()\n"
        "arrived = entry._block()\n"
        "signal.pthread_kill(worker.ident, signal.SIGINT)\n"
        "time.sleep(0.2)\n"
        "print(arrived, signal.getsignal(signal.SIGINT) == signal.SIG_IGN)\n"
        "sys.exit(0)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "False True\n" and done.stderr == "", (done.returncode, done.stderr)


def test_the_help_lists_every_exit_code():
    """`asp --help` names the exit codes (a pipeline newcomer looked there first), each of `ExitCode` once."""
    import re

    from asp_cli.errors import ExitCode

    result = runner.invoke(app, ["--help"])
    said = " ".join(result.output.split())
    listed = [int(code) for code in re.findall(r"(?:Exit codes: |, )(\d+) ", said)]
    assert listed == [int(code) for code in ExitCode]


def test_error_row_export_options_that_change_nothing(tmp_path):
    """E88: `asp export --workers` with the dispatch order, and a --metadata-key that is a path."""
    data = write_jsonl(tmp_path / "data.jsonl", GOOD)
    sched = tmp_path / "s.parquet"
    assert runner.invoke(app, ["schedule", str(data), "-o", str(sched), "-q"]).exit_code == 0
    out = tmp_path / "o.jsonl"
    result = runner.invoke(app, ["export", str(sched), str(data), "-o", str(out), "--workers", "3"])
    assert result.exit_code == 4 and result.stderr.endswith(
        "Error: --workers cuts each train batch into the chunks verl's workers take, which only --order train writes; "
        "the dispatch order keeps the schedule's: add --order train, or leave --workers out\n")
    result = runner.invoke(app, ["export", str(sched), str(data), "-o", str(out), "--metadata-key", "extra_info.index"])
    assert result.exit_code == 4 and "not a path: 'extra_info.index' has a '.'" in result.stderr
    assert not out.exists()


def test_error_rows_calibrate_damaged_timelines(tmp_path):
    """E91: damaged timeline metadata; E92: a row out of range; E93: a recorded preset this machine cannot load;
    E94: --force over a JSON file that is no asp preset."""
    import polars as pl

    from asp_cli.integrate.timings import COLUMNS, write_timeline

    def timeline(name: str, metadata: dict, **changes) -> Path:
        row = {column: None for column in COLUMNS}
        row.update(arrangement="asp", run=0, seq=0, epoch=0, prompt_id="a", sample=0, instance=0, server="s",
                   minibatch=0, forced_tokens=5, planned_prompt_tokens=3, send_s=0.0, first_token_s=0.1,
                   finish_s=0.5, attempts=1)
        path = tmp_path / name
        write_timeline(pl.DataFrame([{**row, **changes}, {**row, "seq": 1}], schema=COLUMNS),
                       {"instances": 1, **metadata}, path)
        return path

    cases = [
        ("E91", timeline("inflight.parquet", {"max_in_flight": 1.5}), [], 3,
         "inflight.parquet: damaged asp timeline metadata (field 'max_in_flight' must be a whole number from 1 to "
         "2,147,483,647, not 1.5); record the timeline again with asp replay -o"),
        ("E92", timeline("early.parquet", {}, send_s=-30.0), [], 3,
         "early.parquet: row 1: column 'send_s' is -30 (run 0, seq 0, sample 0): times are seconds from 0 (the run's "
         "start) to 1e+09; record the timeline again with asp replay -o"),
        ("E93", timeline("nope.parquet", {"preset": "nope"}), [], 4,
         "nope.parquet: the replay simulated with preset 'nope', which is neither a preset of this asp nor a file "
         "here; pass --base with its calibration file, or the preset to fit from (h100-qwen2.5-7b,"),
        ("E94", timeline("ok.parquet", {}), ["--force"], 7,
         "tokenizer.json is not an asp cost preset (a Hugging Face tokenizer: key 'added_tokens', which no preset "
         "has), and asp calibrate writes one: --force replaces only a preset; name another output"),
    ]
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "added_tokens": [], "model": {"type": "BPE"}}')
    for case_id, path, extra, code, words in cases:
        out = tmp_path / ("tokenizer.json" if extra else "p.json")
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        result = runner.invoke(app, ["calibrate", str(path), "-o", str(out), *extra])
        assert result.exit_code == code, (case_id, result.output)
        assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, (case_id, result.stderr)
        assert words in result.stderr and "Traceback" not in result.stderr, (case_id, result.stderr)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before, case_id  # nothing written


def test_error_row_e34_says_what_a_name_of_neither_format_gets(tmp_path):
    """A hostile-input round: E34 said `asp export` and `asp probe` write Parquet for a name other than .jsonl or
    .ndjson ("else Parquet"), but both refuse it (exit 4); the row says so, in the probe's words."""
    row = next(line for line in (REPO / "docs" / "errors.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| E34 |"))
    assert "else Parquet" not in row
    result = runner.invoke(app, ["probe", str(SAMPLE_PROMPTS), "-o", str(tmp_path / "o.txt")])
    assert result.exit_code == 4 and not (tmp_path / "o.txt").exists()
    said = result.stderr.removeprefix("Error: ").strip().replace(str(tmp_path / "o.txt"), "o.txt")
    assert f"`{said}`" in row, said
    schedule = _schedule(tmp_path)
    result = runner.invoke(app, ["export", str(schedule), str(SAMPLE_PROMPTS), "-o", str(tmp_path / "o.txt")])
    assert result.exit_code == 4 and not (tmp_path / "o.txt").exists()
    # Without --format it was told "--format parquet writes Parquet", an option it did not pass.
    said = result.stderr.removeprefix("Error: ").strip().replace(str(tmp_path / "o.txt"), "o.txt")
    assert "--format" not in said and f"`{said}`" in row, said


def test_error_row_export_of_an_epoch_the_schedule_lacks(tmp_path):
    """E99: `asp export --epoch 1` of a one-epoch schedule said "it has epochs 0", not that epochs count from 0."""
    setup_files(tmp_path)
    made = run(tmp_path, "schedule", "{tmp}/good.jsonl", "-o", "{tmp}/s.parquet", "--train-batch-size", "2")
    assert made.exit_code == 0, made.output
    result = run(tmp_path, "export", "{tmp}/s.parquet", "{tmp}/good.jsonl", "-o", "{tmp}/o.jsonl", "--epoch", "1")
    assert result.exit_code == 4 and not (tmp_path / "o.jsonl").exists()
    assert result.stderr == "Error: the schedule has no epoch 1; it has epoch 0 (numbered from 0)\n", result.stderr
    two = run(tmp_path, "schedule", "{tmp}/good.jsonl", "-o", "{tmp}/s2.parquet", "--train-batch-size", "2",
              "--epochs", "2")
    assert two.exit_code == 0, two.output
    result = run(tmp_path, "export", "{tmp}/s2.parquet", "{tmp}/good.jsonl", "-o", "{tmp}/o.jsonl", "--epoch", "2")
    assert result.stderr == "Error: the schedule has no epoch 2; it has epochs 0..1 (numbered from 0)\n", result.stderr


def test_error_row_verl_export_that_fills_no_train_batch(tmp_path):
    """E146: `asp export --format verl` of a schedule whose rows fill no train batch: verl drops the short batch and
    trains nothing (before, exit 0 and "0 batches of 128 + 2 rows")."""
    setup_files(tmp_path)
    made = run(tmp_path, "schedule", "{tmp}/good.jsonl", "-o", "{tmp}/s.parquet", "--engine", "streaming",
               "--max-lag", "0", "--trainer", "schedule")
    assert made.exit_code == 0, made.output
    result = run(tmp_path, "export", "{tmp}/s.parquet", "{tmp}/good.jsonl", "-o", "{tmp}/v.parquet", "--format", "verl")
    assert result.exit_code == 4 and not (tmp_path / "v.parquet").exists()
    assert result.stderr == (
        "Error: s.parquet: its 2 rows are fewer than one train batch of 128 (the schedule's --train-batch-size, verl's "
        "data.train_batch_size), and verl's dataloader drops a partial batch (drop_last=True): the file would train no "
        "step (verl stops with 'Train dataloader is empty!'); make the schedule with a --train-batch-size that divides "
        "its 2 prompts (e.g. 2 or 1)\n"), result.stderr
