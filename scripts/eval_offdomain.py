"""How the bundled predictor (trained on math) ranks prompts that are not math: chat and code.

Usage: python scripts/eval_offdomain.py [--shared ../shared/data]

Builds one evaluation set from real outputs in ../shared/data (read at run time, never shipped): the 805
AlpacaEval instructions with GPT-4 Turbo's answers (gpt4_1106_preview, CC BY-NC 4.0: evaluation only) and the
880 LiveCodeBench problems with o1-mini's visible answers (MIT; o1's hidden reasoning is not in them), lengths
in tokens = characters / 4. Prints Kendall tau of the bundled model's predicted length, and of prompt length
alone, against the real length, overall and per kind (`asp_cli.evaluate_predictor`, as `asp predictor eval`).
It also predicts two prompts a newcomer tries first: "Hi!" and a request for a 2,000-word essay.
"""

from __future__ import annotations

import argparse
import gzip
import tempfile
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]


def build(shared: Path) -> pl.DataFrame:
    alpaca = shared / "alpaca_eval_outputs"
    instructions = pl.read_ndjson(alpaca / "instructions.jsonl")
    answers = pl.read_csv(alpaca / "lengths.csv.gz").filter(pl.col("results_dir") == "gpt4_1106_preview")
    chat = instructions.join(answers, on="instruction_id").select(
        pl.concat_str(pl.lit("chat-"), pl.col("instruction_id").cast(pl.String)).alias("id"),
        pl.col("instruction").alias("prompt"),
        (pl.col("output_chars") / 4).ceil().cast(pl.Int64).alias("response_tokens"),
        pl.lit("chat").alias("data_source"),
    )
    code_dir = shared / "livecodebench_o1_outputs"
    problems = pl.read_ndjson(code_dir / "problems.jsonl").select("question_id", "question_content")
    with gzip.open(code_dir / "O1-Mini-2024-09-12.jsonl.gz") as handle:
        outputs = pl.read_ndjson(handle.read()).select("question_id", "output")
    code = problems.join(outputs, on="question_id").select(
        pl.concat_str(pl.lit("code-"), pl.col("question_id")).alias("id"),
        pl.col("question_content").alias("prompt"),
        (pl.col("output").str.len_chars() / 4).ceil().cast(pl.Int64).alias("response_tokens"),
        pl.lit("code").alias("data_source"),
    )
    return pl.concat([chat, code]).sort("id")


def main() -> None:
    from asp_cli import evaluate_predictor, predict_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    if not (args.shared / "alpaca_eval_outputs").is_dir():
        print(f"Skipped: {args.shared} has no alpaca_eval_outputs/ (evaluation data, read at run time)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "chat_code.jsonl"
        build(args.shared).write_ndjson(data)
        result = evaluate_predictor([data])
        print("set            prompts  tau (model)  tau (prompt length)")
        overall = result["overall"]
        rows = [("chat + code", overall)] + sorted(result["by_source"].items())
        for name, part in rows:
            model = part["group_max"]["kendall_tau"]
            length = part["baseline_prompt_length_group_max"]["kendall_tau"]
            print(f"{name:<14} {part['prompts']:>7}  {model:>11.3f}  {length:>19.3f}")
        prompts = Path(tmp) / "first.jsonl"
        pl.DataFrame({"id": ["hi", "essay"], "prompt": [
            "Hi!", "Write a 2,000-word essay on the history of the printing press."]}).write_ndjson(prompts)
        table = predict_file([prompts]).table
        for prompt_id, tokens in zip(table["prompt_id"], table["predicted_max_tokens"]):
            print(f"predicted group maximum of {prompt_id!r} (8 samples): {tokens} tokens")


if __name__ == "__main__":
    main()
