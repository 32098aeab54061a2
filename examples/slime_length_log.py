"""Log each slime sample's response length for `asp observe`, from slime's reward hook.

    --custom-rm-path slime_length_log.reward_func --rm-type dapo    # your rule, as before; this file on PYTHONPATH

slime (v0.3.1) calls the function ``--custom-rm-path`` names where it would call its own rule
(``slime/rollout/rm_hub/__init__.py``): once per sample, ``await reward_func(args, sample)`` (``async_rm``), or
with a list of samples (``batched_async_rm``: ``--group-rm``, or a custom generate function that returns several
samples), where it wants a list of rewards back. This one computes the rewards with slime's own rules
(``--rm-type``, or a sample's ``metadata["rm_type"]``), then appends one JSON line per sample to
``$ASP_LENGTH_LOG`` (``asp_lengths.jsonl`` by default):

    {"prompt_id": ..., "response_tokens": ..., "truncated": ...}

``prompt_id`` is the one `asp export --format jsonl --metadata-key metadata` wrote into each row's metadata
(``asp_prompt_id`` with ``--prefix asp_``); ``response_tokens`` is slime's ``sample.response_length``;
``truncated`` is true where the sample stopped at the length cap (``Sample.Status.TRUNCATED``). Samples without
that id (an evaluation set that is not an asp export) are not logged. Where you had a reward function of your
own in ``--custom-rm-path`` (not a ``--rm-type`` rule), name it in ``$ASP_CUSTOM_RM_PATH`` (``module.function``, as
you gave it to slime, in the rollout's environment): slime's dispatch then calls yours, with the sample or the list
as it would have, and this one logs. Then, after the epoch:

    asp observe asp_lengths.jsonl -o history.parquet --append --schedule schedule.parquet --epoch 0

Not run against slime here (slime is not on PyPI); tests/test_examples.py runs it against stand-ins of the names
it imports, written from slime v0.3.1's source. Each line is written with one ``write`` of an ``O_APPEND`` file,
so the rollout's concurrent samples do not interleave their lines.
"""

from __future__ import annotations

import copy
import json
import os


async def reward_func(args, sample, **kwargs):
    """slime's reward for ``sample`` (or the rewards of a list of samples), with each length logged."""
    from slime.rollout.rm_hub import async_rm, batched_async_rm  # slime's dispatch; told not to call back here

    own = copy.copy(args)
    # Your own --custom-rm-path, which slime's dispatch calls where it is set (slime/rollout/rm_hub/__init__.py:
    # async_rm and batched_async_rm): a slime newcomer with a reward function of their own had no way to keep it.
    own.custom_rm_path = os.environ.get("ASP_CUSTOM_RM_PATH") or None
    if own.custom_rm_path is not None and own.custom_rm_path.rsplit(".", 1)[0].endswith("slime_length_log"):
        raise RuntimeError(f"ASP_CUSTOM_RM_PATH={own.custom_rm_path} names this hook: name your own reward function "
                           "there (the --custom-rm-path you gave slime before), or unset it for slime's --rm-type rule")
    if isinstance(sample, list):
        rewards = await batched_async_rm(own, sample, **kwargs)
        for one in sample:
            _log(one)
        return rewards
    reward = await async_rm(own, sample, **kwargs)
    _log(sample)
    return reward


def _log(sample) -> None:
    metadata = sample.metadata if isinstance(sample.metadata, dict) else {}
    # `asp export --prefix asp_` where the row's own metadata has a prompt_id: asp's is the prefixed one
    key = next((k for k in ("asp_prompt_id", "prompt_id") if k in metadata), None)
    if key is None:
        return
    line = {"prompt_id": metadata[key], "response_tokens": int(sample.response_length),
            "truncated": getattr(sample.status, "value", sample.status) == "truncated"}
    path = os.environ.get("ASP_LENGTH_LOG", "asp_lengths.jsonl")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)
