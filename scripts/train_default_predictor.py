"""Rebuild the bundled default length model, asp_cli/models/default.skops, from data that may ship.

    python scripts/train_default_predictor.py [--data ../shared/data] [--out asp_cli/models/default.skops]

Training data: ZeroEval's GSM8K-test (1,319) and MATH-L5 (721) prompts (Apache-2.0) with the lengths of
every generator that answered all 2,040 of them (o1 models left out: their hidden reasoning is not
counted). Each generator is rescaled to the pooled mean log length, so each prompt's target is the
consensus of ~25 instruct models; tokens are characters / 3.12 (see eval_predictor.CHARS_PER_TOKEN).
The spread is fixed at 0.3 (within-prompt sd of log length of one generator sampling at temperature
0.6 on AIME), because the spread across generators is not the spread of one generator's samples.
Metadata features are off: users' data-source names will not match ZeroEval's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_predictor import (  # noqa: E402
    DEFAULT_DATA, ROOT, consensus_lengths, cross_validate, full_generators, load_zeroeval,
)

from asp_cli.predict import model as P  # noqa: E402
from asp_cli.predict.evaluate import evaluate_frame  # noqa: E402

PARAMS = {"use_metadata": False, "log_spread": 0.3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=ROOT / "asp_cli" / "models" / "default.skops")
    args = parser.parse_args()
    prompts, lengths = load_zeroeval(args.data)
    generators = full_generators(lengths, prompts)
    consensus = consensus_lengths(lengths, generators)
    started = time.time()
    cv = evaluate_frame(cross_validate(prompts, consensus, **PARAMS))
    model = P.LengthPredictor(random_state=0, **PARAMS).fit(prompts.with_columns(pl.lit(None, pl.String).alias(C_SOURCE)), consensus)
    model.meta_ = {
        "name": "asp default (ZeroEval GSM8K+MATH-L5 consensus)",
        "training_data": "zeroeval_math_gsm_outputs (Apache-2.0, github.com/yuchenlin/ZeroEval @570c626): "
                         f"GSM8K test + MATH level 5 prompts, lengths of {len(generators)} generators",
        "length_units": "tokens estimated as output characters / 3.12",
        "evaluation": {
            "method": "5-fold cross-validation over prompt ids (scripts/eval_predictor.py)",
            "kendall_tau_group_max": cv["overall"]["group_max"]["kendall_tau"],
            "spearman_group_max": cv["overall"]["group_max"]["spearman"],
            "tail_recall": cv["overall"]["group_max"]["tail_recall"],
            "mae_log": cv["overall"]["group_max"]["mae_log"],
            "baseline_prompt_length_tau": cv["overall"]["baseline_prompt_length_group_max"]["kendall_tau"],
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    P.save(model, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) in {time.time() - started:.1f} s; "
          f"CV tau {cv['overall']['group_max']['kendall_tau']}", file=sys.stderr)
    if args.out.resolve() == (ROOT / "asp_cli" / "models" / "default.skops").resolve():
        # The bundled model's state is compiled into asp (loading it then needs no skops import).
        from compile_bundled_model import main as compile_bundled

        sys.argv = [sys.argv[0]]
        compile_bundled()


C_SOURCE = "data_source"

if __name__ == "__main__":
    main()
