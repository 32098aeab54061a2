"""Log each OpenRLHF sample's prompt and response for `asp observe`, from OpenRLHF's reward function.

    ASP_REWARD_FUNC=my_reward.py --reward.remote_url /path/to/openrlhf_length_log.py

OpenRLHF (0.11.2) loads ``reward_func(queries, prompts, labels)`` from the Python file ``--reward.remote_url``
names (``openrlhf/utils/agent.py:196-205``) and calls it once per sample, with lists of one (lines 286-290 and
308-325): ``queries`` holds the prompt and the response decoded with their special tokens
(``skip_special_tokens=False``), ``prompts`` the prompt as it was sent (the chat template applied), ``labels`` the
row's label. No id reaches it (``PromptDataset`` keeps only the prompt, the label, ``datasource`` and the images),
so this file appends each sample's prompt and response text to ``$ASP_LENGTH_LOG`` (``asp_lengths.jsonl`` by
default), one JSON line each:

    {"input": ..., "output": ...}

and returns what your own ``reward_func`` returns: the one in the file ``$ASP_REWARD_FUNC`` names (the file you
gave ``--reward.remote_url`` before). Both run inside OpenRLHF's vLLM engine actors (Ray), so set both variables
in their environment (``ray job submit --runtime-env-json '{"env_vars": {"ASP_REWARD_FUNC": ..., "ASP_LENGTH_LOG":
...}}'``), as absolute paths; on several nodes put ``{host}`` in the log's name (each node writes its own). A
missing ``ASP_REWARD_FUNC`` stops the run as the engines load this file. After the epoch, asp matches each input
to the dataset prompt it contains and counts each output with the model's tokenizer:

    asp observe asp_lengths.jsonl -o history.parquet --append --schedule schedule.parquet --dataset prompts.jsonl \
        --tokenizer tokenizer.json --epoch 0

(``--schedule``: the schedule this epoch's export was made from, whose id column the history's ids must be.)

The response keeps its special tokens, so the end-of-sequence token of one that stopped by itself is counted,
as the policy generated it (verl's dumps drop it, and asp says so for those). The samples of prompts whose text
other prompts of the dataset share are spread over them in turn (`asp observe` counts them). Run through OpenRLHF 0.11.2's own
``SingleTurnAgentExecutor`` by scripts/check_openrlhf_hook.py (pip-installed, no GPU); tests/test_examples.py calls
it in threads, as OpenRLHF's ``_fetch_rewards_via_func`` does, and observes its log. Each line is written with one ``write`` of an ``O_APPEND`` file, so concurrent samples do not
interleave their lines.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket


def _own_reward_func():
    """The reward function of the file ``$ASP_REWARD_FUNC`` names, loaded as OpenRLHF loads one. Loaded when this
    file is (OpenRLHF loads it as the engines start): a missing setting stops the run there. Raised from inside
    ``reward_func`` it would be caught by OpenRLHF, which logs it at INFO and trains with no reward
    (``openrlhf/utils/agent.py:303-304``)."""
    path = os.environ.get("ASP_REWARD_FUNC")
    if not path:
        raise RuntimeError("set ASP_REWARD_FUNC to the Python file of your reward_func (the one you gave "
                           "--reward.remote_url before), in the environment of OpenRLHF's engines")
    spec = importlib.util.spec_from_file_location("asp_own_reward_func", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"ASP_REWARD_FUNC={path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func


_OWN = _own_reward_func()


def reward_func(queries, prompts, labels):
    """Your reward function's result for these samples, each sample's prompt and response logged."""
    for query, prompt in zip(queries, prompts):
        # The query is the prompt's tokens and the response's, decoded together: the response is what follows the
        # prompt. A prompt that does not decode back to itself leaves no way to cut it off; that sample is not
        # logged (`asp observe --schedule` names prompts with fewer samples than the schedule's).
        if query.startswith(prompt):
            _log({"input": prompt, "output": query[len(prompt):]})
    return _OWN(queries, prompts, labels)


def _log(line: dict) -> None:
    # `{host}` in the name: each node writes its own log (appends from several machines to one shared file may
    # interleave); give them all to `asp observe`.
    path = os.environ.get("ASP_LENGTH_LOG", "asp_lengths.jsonl").replace("{host}", socket.gethostname())
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)
