"""Log each slime sample's response length for `asp observe`, from slime's reward hook.

    --custom-rm-path slime_length_log.reward_func --rm-type dapo    # your rule, as before; this file on PYTHONPATH

slime (v0.3.1) calls the function ``--custom-rm-path`` names once per sample, ``await reward_func(args, sample)``,
where it would call its own rule (``slime/rollout/rm_hub/__init__.py``, ``async_rm``; not with ``--group-rm``,
which passes whole groups). This one computes the reward with slime's own rule (``--rm-type``, or the sample's
``metadata["rm_type"]``), then appends one JSON line to ``$ASP_LENGTH_LOG`` (``asp_lengths.jsonl`` by default):

    {"prompt_id": ..., "response_tokens": ..., "truncated": ...}

``prompt_id`` is the one `asp export --format jsonl --metadata-key metadata` wrote into each row's metadata;
``response_tokens`` is slime's ``sample.response_length``; ``truncated`` is true where the sample stopped at the
length cap (``Sample.Status.TRUNCATED``). Then, after the epoch:

    asp observe asp_lengths.jsonl -o history.parquet --append --schedule schedule.parquet --epoch 0

Not run against slime here (slime is not on PyPI); tests/test_examples.py runs it against stand-ins of the two
names it imports, written from slime v0.3.1's source. Each line is written with one ``write`` of an ``O_APPEND``
file, so the rollout's concurrent samples do not interleave their lines.
"""

from __future__ import annotations

import copy
import json
import os


async def reward_func(args, sample, **kwargs):
    """slime's reward for ``sample``, with its length logged."""
    from slime.rollout.rm_hub import async_rm  # slime's own dispatch; it would call back here, so it is told not to

    own = copy.copy(args)
    own.custom_rm_path = None
    reward = await async_rm(own, sample, **kwargs)
    metadata = sample.metadata if isinstance(sample.metadata, dict) else {}
    key = next((k for k in ("prompt_id", "asp_prompt_id") if k in metadata), None)  # asp export --prefix asp_
    if key is not None:  # rows of an asp export; anything else (an eval set) is not logged
        line = {"prompt_id": metadata[key], "response_tokens": int(sample.response_length),
                "truncated": getattr(sample.status, "value", sample.status) == "truncated"}
        path = os.environ.get("ASP_LENGTH_LOG", "asp_lengths.jsonl")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)
    return reward
