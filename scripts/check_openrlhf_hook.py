"""Run examples/openrlhf_length_log.py through OpenRLHF's own reward-function loader and caller (no GPU).

    python -m venv orl && orl/bin/pip install --no-deps openrlhf==0.11.2 && orl/bin/pip install aiohttp sympy \\
        pylatexenc torch numpy transformers
    orl/bin/python scripts/check_openrlhf_hook.py

OpenRLHF 0.11.2's ``SingleTurnAgentExecutor`` loads the file ``--reward.remote_url`` names and calls its
``reward_func`` through ``_fetch_rewards_via_func`` (``openrlhf/utils/agent.py:196-205, 308-325``). Checked: without
``ASP_REWARD_FUNC`` the executor stops as it loads the file; with it, the user's reward comes back and the log holds the
sample's prompt and its response, special tokens included. Exits 1 where a check fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "openrlhf_length_log.py"


def main() -> int:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    with tempfile.TemporaryDirectory() as folder:
        own, log = Path(folder) / "my_reward.py", Path(folder) / "lengths.jsonl"
        own.write_text("def reward_func(queries, prompts, labels):\n"
                       "    return {'rewards': [1.0], 'scores': [1.0], 'extra_logs': {}}\n")
        os.environ.pop("ASP_REWARD_FUNC", None)
        try:
            SingleTurnAgentExecutor(remote_rm_url=str(EXAMPLE))
            print("FAILED: loaded without ASP_REWARD_FUNC", file=sys.stderr)
            return 1
        except RuntimeError as exc:
            print(f"without ASP_REWARD_FUNC, stopped at load: {exc}")
        os.environ.update(ASP_REWARD_FUNC=str(own), ASP_LENGTH_LOG=str(log))
        executor = SingleTurnAgentExecutor(remote_rm_url=str(EXAMPLE))
        prompt = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
        rewards = asyncio.run(executor._fetch_rewards_via_func([prompt + "4<|im_end|>"], [prompt], ["4"]))
        logged = [json.loads(line) for line in log.read_text().splitlines()]
        print(f"reward: {rewards}; log: {logged}")
        if rewards != [{"rewards": [1.0], "scores": [1.0], "extra_logs": {}}] or logged != [
                {"input": prompt, "output": "4<|im_end|>"}]:
            print("FAILED: another reward or log than expected", file=sys.stderr)
            return 1
    print("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
