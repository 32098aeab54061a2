"""Rebuild sample_data/prompts.jsonl from the shippable folders of ../shared/data (see sample_data/README.md).

Usage: python scripts/make_sample_data.py [--shared ../shared/data]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _row(uid: str, source: str, text: str, answer: str, split: str, index: int, difficulty=None) -> dict:
    row = {
        "id": uid,
        "data_source": source,
        "prompt": [{"role": "user", "content": f"{text.strip()}\n{INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(answer)},
        "extra_info": {"split": split, "index": index},
    }
    if difficulty is not None:
        row["difficulty"] = float(difficulty)
    return row


def build(shared: Path) -> list[dict]:
    rows: list[dict] = []
    zeroeval = _jsonl(shared / "zeroeval_math_gsm_outputs" / "problems.jsonl")
    # GSM8K test and MATH level 5 as ZeroEval lists them, so their ids match ZeroEval's real output lengths.
    for i, r in enumerate(r for r in zeroeval if r["dataset"] == "gsm"):
        rows.append(_row(f"gsm-{r['id']}", "openai/gsm8k", r["problem"], r["answer"].lstrip("# ").strip(),
                         "test", i))
    for i, r in enumerate(_jsonl(shared / "math_eval_prompts_limo" / "math500.jsonl")):
        rows.append(_row(f"math500-{i}", "HuggingFaceH4/MATH-500", r["problem"], r["answer"], "test", i,
                         r.get("level")))
    for i, r in enumerate(r for r in zeroeval if r["dataset"] == "math-l5"):
        rows.append(_row(f"math-l5-{r['id']}", "math-l5", r["problem"], r["answer"], "test", i, 5))
    deep = _jsonl(shared / "deepmath_rl_prompts_rollpacker" / "math_deepmath_deal_new.jsonl")[:1000]
    for i, r in enumerate(deep):
        rows.append(_row(f"deepmath-{r['id']}", "deepmath_103k", r["prompt"], r["ground_truth"], "train", i,
                         r["difficulty"]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "sample_data" / "prompts.jsonl")
    args = parser.parse_args()
    rows = build(args.shared)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} prompts to {args.out}")


if __name__ == "__main__":
    main()
