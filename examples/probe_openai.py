#!/usr/bin/env python3
"""Generate an `asp probe` file with any OpenAI-compatible server and write a rollout log for `asp observe`.

    python examples/probe_openai.py probe.jsonl -o probe_log.jsonl --base-url http://localhost:8000/v1 \\
        --model Qwen/Qwen2.5-7B-Instruct --samples 1 --max-tokens 8192 --temperature 1.0

Standard library only (urllib, threads). Each prompt of the probe (a chat list under ``prompt`` or
``messages``, or text under ``prompt``, ``question``, ``problem``, ``instruction`` or ``input``, which is sent as
one user message; or the column ``--prompt-key`` names, as `asp probe --prompt-key` did) is sent ``--samples`` times to ``/chat/completions`` (``--completions``: as text to
``/completions``, for a run trained without a chat template) with ``n=1``: the server's
``usage.completion_tokens`` is then exactly one sample's length (with ``n > 1`` servers report the sum), and
``finish_reason == "length"`` marks a sample that hit ``--max-tokens``. Use the sampling settings of your
training run (temperature, top_p, max tokens), so the probe sees the lengths training will see.

The log has one JSON line per sample, sorted by prompt and sample: ``prompt_id``, ``sample``,
``response_tokens``, ``truncated``. Then::

    asp observe probe_log.jsonl -o history.parquet --dataset train.jsonl
    asp schedule train.jsonl -o schedule.parquet --history history.parquet --max-response-tokens 8192

A request that still fails after ``--retries`` tries (an error answer, a refused or dropped connection, a
timeout) is left out and counted; the script exits 1 when any was, after writing the rest, and the same
command with ``--resume`` sends only the samples the log lacks. An existing log (or ``OUTPUT.partial``) is
kept: without ``--resume`` or ``--force`` the script refuses it (exit 7), as asp refuses to replace an output.
A timed-out request is a long sample: left out, it would calibrate the schedule too short, so the script says
to raise ``--timeout`` (3600 s by default: a 32k-token reasoning sample on a loaded server takes many minutes).
Each answer is also written as it comes to ``OUTPUT.partial``, so that a run stopped midway (Ctrl-C, a lost
machine) loses nothing: ``--resume`` reads it back. The API key, if the server needs one, comes from ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

# The columns asp looks for, in its order (asp_cli/columns.py).
ID_KEYS = ("id", "prompt_id", "uid", "unique_id", "question_id", "instruction_id", "problem_id", "index")
PROMPT_KEYS = ("prompt", "messages", "question", "problem", "instruction", "input")


def field(row: dict, key: str):
    """``row[key]``, where a dotted key names a field inside an object (verl's ``extra_info.index``), as asp reads
    ``--id-key``; a key with a dot that is itself a column wins."""
    if key in row or "." not in key:
        return row.get(key)
    value = row
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def messages_of(row: dict, prompt_key: str | None = None) -> list[dict]:
    """The chat messages of one probe row (from ``prompt_key`` where given, as `asp probe --prompt-key`)."""
    for key in (prompt_key,) if prompt_key else PROMPT_KEYS:
        value = field(row, key)
        if isinstance(value, list) and value and all(isinstance(m, dict) and "content" in m for m in value):
            return [{"role": m.get("role", "user"), "content": m["content"]} for m in value]
        if isinstance(value, str) and value.strip():
            text = value.strip()
            if text.startswith("[{"):
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = None
                if isinstance(parsed, list):
                    return messages_of({key: parsed}, key)
            return [{"role": "user", "content": value}]
    raise ValueError(f"no prompt (looked for {', '.join((prompt_key,) if prompt_key else PROMPT_KEYS)}"
                     + ("" if prompt_key else "; name the column with --prompt-key") + ")")


def id_of(row: dict, id_key: str | None, line: int) -> str:
    keys = (id_key,) if id_key else ID_KEYS
    for key in keys:
        value = field(row, key)
        if value is not None:
            return str(value)
    raise ValueError(f"no prompt id (looked for {', '.join(keys)})")


def text_of(messages: list[dict]) -> str:
    """The prompt as one text, for ``--completions`` (a run without a chat template): the messages' contents in
    order, one per line (a plain-text probe row is one message); a content given as parts (OpenAI's
    ``[{"type": "text", "text": ...}]``) is its text parts joined, where it was sent as the list's Python text.
    A part that is not text (an image) cannot go to ``/completions``: ValueError."""
    texts = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            parts = [part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
                     for part in content]
            if any(not isinstance(text, str) for text in parts):
                raise ValueError("a message holds a part that is not text (an image?), which /completions cannot "
                                 "take; drop --completions to send the chat list to /chat/completions")
            content = "".join(parts)
        texts.append(str(content))
    return "\n".join(texts)


def complete(base_url: str, body: dict, api_key: str | None, timeout: float, retries: int,
             endpoint: str = "/chat/completions") -> dict:
    """One completion; retried with exponential backoff on connection errors and 429/5xx answers."""
    request = urllib.request.Request(
        base_url.rstrip("/") + endpoint, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})})
    for attempt in range(retries):
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code not in (408, 429) and exc.code < 500 or attempt == retries - 1:
                raise
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            # URLError: refused; HTTPException (RemoteDisconnected, IncompleteRead) and OSError (a reset
            # connection, a timeout) come while the answer is read. A certificate that does not verify will not
            # verify on a retry either.
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError) or attempt == retries - 1:
                raise
        time.sleep(min(2.0**attempt * 0.5, 30.0))
    raise RuntimeError("unreachable")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe", type=Path, help="the probe, as JSON lines (asp probe ... -o probe.jsonl)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the rollout log to write (.jsonl)")
    parser.add_argument("--base-url", default="http://localhost:8000/v1")
    parser.add_argument("--model", required=True)
    parser.add_argument("--samples", type=int, default=1, help="samples per prompt (1 is enough to calibrate)")
    parser.add_argument("--max-tokens", type=int, required=True, help="the training run's response cap")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--id-key", default=None,
                        help="the probe's id column, if not detected (a dotted name reaches inside an object: "
                             "extra_info.index), as asp probe --id-key named it")
    parser.add_argument("--prompt-key", default=None, help="the probe's prompt column, as asp probe --prompt-key "
                                                            "named it, if not detected")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds per request: the longest sample's time at the server's load, or it is lost")
    parser.add_argument("--retries", type=int, default=3,
                        help="tries per request in all, the first included (at least 1), with backoff between them")
    parser.add_argument("--completions", action="store_true",
                        help="send the prompt as text to /completions, with no chat template (a base-model run "
                             "trained without one), instead of /chat/completions")
    parser.add_argument("--resume", action="store_true",
                        help="keep the samples already in --output and send only the ones it lacks")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing --output (and the answers a stopped run left in OUTPUT.partial)")
    args = parser.parse_args(argv)
    if args.samples < 1 or args.max_tokens < 1 or args.concurrency < 1 or args.retries < 1:
        parser.error("--samples, --max-tokens, --concurrency and --retries must be at least 1")

    try:
        with args.probe.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        print(f"Error: cannot read the probe {args.probe}: {exc.strerror or exc}", file=sys.stderr)
        return 3
    if magic == b"PAR1":
        print(f"Error: {args.probe} is Parquet; this script reads JSON lines: write the probe with "
              "`asp probe ... -o probe.jsonl`", file=sys.stderr)
        return 3
    # The answers of a run stopped midway, written as they came (below): read back by --resume, else replaced.
    journal = args.output.with_name(args.output.name + ".partial")
    if args.resume and args.force:
        parser.error("give --resume (keep the samples already written) or --force (replace them), not both")
    if not args.resume and not args.force:
        # A log (or a stopped run's answers) is generation time spent: replaced in silence by a rerun that forgot
        # --resume, as asp's own commands refuse to replace their outputs.
        for kept in (args.output, journal):
            if kept.exists():
                print(f"Error: {kept} exists ({'a stopped run' if kept is journal else 'an earlier run'}'s samples); "
                      "pass --resume to keep them and send only the rest, or --force to replace them",
                      file=sys.stderr)
                return 7
    done: list[dict] = []
    for log in (args.output, journal) if args.resume else ():
        if not log.exists():
            continue
        for line, text in enumerate(log.read_text(encoding="utf-8").splitlines(), 1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
                row["prompt_id"], row["sample"] = str(row["prompt_id"]), int(row["sample"])
            except (ValueError, KeyError, TypeError):
                if log is journal:  # its last line cut off as the run stopped
                    continue
                print(f"Error: {log}:{line}: not a line this script writes (prompt_id, sample, "
                      "response_tokens, truncated), so --resume cannot tell what it holds; write to a new -o",
                      file=sys.stderr)
                return 3
            done.append(row)
    done = list({(r["prompt_id"], r["sample"]): r for r in done}.values())
    have = {(r["prompt_id"], r["sample"]) for r in done}
    jobs = []
    first_line: dict[str, int] = {}
    with args.probe.open(encoding="utf-8") as handle:
        for line, text in enumerate(handle, 1):
            if not text.strip():
                continue
            row = json.loads(text)
            try:
                prompt_id, messages = id_of(row, args.id_key, line), messages_of(row, args.prompt_key)
                if args.completions:
                    text_of(messages)  # a part it cannot send, said before any request
            except ValueError as exc:
                print(f"Error: {args.probe}:{line}: {exc}", file=sys.stderr)
                return 3
            if prompt_id in first_line:
                # Two prompts under one id would be logged as one, each sample then credited to whichever the
                # dataset names so (a newcomer's --id-key extra_info.index repeats across verl's sources).
                named = f"--id-key {args.id_key}" if args.id_key else "the id column found"
                # The column read without --id-key: the dataset's own id, or the prompt_id asp probe adds where the
                # dataset has none (a probe of a file with an `id` has no prompt_id to name).
                found = next((key for key in ID_KEYS if field(row, key) is not None), None)
                fix = (f"leave --id-key out to read its {found!r}, or pass --id-key {found}"
                       if args.id_key and found and found != args.id_key else
                       "--id-key prompt_id (asp probe writes it where the dataset has no id column), or leave "
                       "--id-key out")
                print(f"Error: {args.probe}:{line}: prompt id {prompt_id!r} ({named}) is line {first_line[prompt_id]}'s "
                      f"too: name the probe's unique id column: {fix}", file=sys.stderr)
                return 3
            first_line[prompt_id] = line
            jobs.extend((prompt_id, sample, messages) for sample in range(args.samples)
                        if (prompt_id, sample) not in have)
    api_key = os.environ.get("OPENAI_API_KEY")

    def run(job):
        prompt_id, sample, messages = job
        body = {"model": args.model, "n": 1, "max_tokens": args.max_tokens, "temperature": args.temperature,
                "top_p": args.top_p, **({"prompt": text_of(messages)} if args.completions else {"messages": messages})}
        try:
            answer = complete(args.base_url, body, api_key, args.timeout, args.retries,
                              "/completions" if args.completions else "/chat/completions")
            tokens = int(answer["usage"]["completion_tokens"])
            reason = answer["choices"][0].get("finish_reason")
        except urllib.error.HTTPError as exc:  # the server's own words say why (a model name it does not serve)
            detail = exc.read().decode("utf-8", "replace").strip()[:300] if exc.fp else ""
            return prompt_id, sample, None, f"HTTP {exc.code}: {detail or exc.reason}"
        except Exception as exc:  # noqa: BLE001 - counted and reported, the rest goes on
            return prompt_id, sample, None, f"{type(exc).__name__}: {str(exc)[:200]}"
        return prompt_id, sample, {"prompt_id": prompt_id, "sample": sample, "response_tokens": tokens,
                                   "truncated": reason == "length"}, None

    results = []
    pool = ThreadPoolExecutor(max_workers=args.concurrency)
    try:
        with journal.open("w", encoding="utf-8") as written:
            # Every answer so far first, then each as it comes: a run stopped at any point can be resumed.
            written.writelines(json.dumps(r, sort_keys=True) + "\n" for r in done)
            for future in as_completed([pool.submit(run, job) for job in jobs]):
                results.append(future.result())
                if results[-1][2] is not None:
                    written.write(json.dumps(results[-1][2], sort_keys=True) + "\n")
                    written.flush()
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        print(f"Interrupted: {sum(r[2] is not None for r in results) + len(done)} samples kept in {journal}; the "
              "same command with --resume sends only the rest", file=sys.stderr)
        os._exit(130)  # the requests in flight are not waited for
    pool.shutdown()
    rows = done + [r[2] for r in results if r[2] is not None]
    failed = [r for r in results if r[2] is None]
    # The probe's order (answers come in any order), after any the log held that the probe does not name.
    order = {pid: i for i, pid in enumerate(dict.fromkeys([*(r["prompt_id"] for r in done if r["prompt_id"] not in
                                                              first_line), *first_line]))}
    rows.sort(key=lambda r: (order[r["prompt_id"]], r["sample"]))
    refused = [r for r in failed if r[3].startswith("HTTP 4") and not r[3].startswith(("HTTP 408", "HTTP 429"))]
    if not rows:  # nothing answered: an empty log would only fail the next step (`asp observe`: "the file is empty")
        for prompt_id, sample, _, error in failed[:3]:
            print(f"Warning: prompt {prompt_id!r} sample {sample}: {error}", file=sys.stderr)
        fix = ("the server refused them: check --model and --base-url" if len(refused) == len(failed)
               else "check that the server is up, then run the same command again")
        print(f"Error: all {len(failed)} requests failed; nothing written to {args.output}; {fix}", file=sys.stderr)
        journal.unlink(missing_ok=True)
        return 1
    # Sorted, then renamed over the output: a reader never sees half a log, and the journal is gone with it.
    journal.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    journal.replace(args.output)
    print(f"wrote {args.output}: {len(rows)} samples of {len({r['prompt_id'] for r in rows})} prompts "
          f"({sum(r['truncated'] for r in rows)} hit --max-tokens)", file=sys.stderr)
    for prompt_id, sample, _, error in failed[:5]:
        print(f"Warning: prompt {prompt_id!r} sample {sample}: {error}", file=sys.stderr)
    if failed:
        timed_out = sum("timed out" in r[3] or r[3].startswith(("TimeoutError", "socket.timeout")) for r in failed)
        print(f"Error: {len(failed)} request{'s' if len(failed) > 1 else ''} failed and {'are' if len(failed) > 1 else 'is'} not in the log; "
              + ("the server refused some (HTTP 4xx): fix the request, then " if refused else "")
              + (f"{timed_out} timed out after --timeout {args.timeout:g} s, the longest samples, which left out "
                 "calibrate the schedule too short: raise --timeout and " if timed_out else "")
              + "run the same command with --resume to send only those", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
