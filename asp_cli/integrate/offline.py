"""The same replay through vLLM's offline ``LLM`` in this process, for users without a server
(``pip install 'asp-cli[vllm]'``; vLLM is imported only here, only when asked for).

One engine runs every instance's minibatches one after another, each as one blocking ``generate()`` call with
a ``SamplingParams`` per request (``max_tokens = min_tokens = L``, ``ignore_eos``). Instances are independent
in a blocking replay without a trainer, so each instance's times are laid on its own clock from 0, as if the
K instances had run side by side; with free dispatch the next minibatch goes to the instance whose clock is
earliest. A request's first-token and finish times come from vLLM's per-request metrics where the installed
version reports them, else its finish is the end of its ``generate()`` call and its first token unknown.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from asp_cli.errors import Interrupted, SettingsError
from asp_cli.integrate.live import LiveOutcome, Progress, RunRecord
from asp_cli.integrate.replay_plan import RequestPlan
from asp_cli.integrate.serving import Completion

MISSING_VLLM = ("--in-process needs vLLM, which is not installed here; pip install 'asp-cli[vllm]' on the GPU "
                "machine, or serve the model (vllm serve MODEL) and pass --servers")


def load_vllm() -> Any:
    """Import vLLM, or say how to get it.

    Raises
    ------
    SettingsError
        When vLLM is not installed.
    """
    try:
        import vllm
    except ImportError:
        raise SettingsError(MISSING_VLLM) from None
    return vllm


def run_in_process(plans: list[RequestPlan], settings: Any, *, instances: int, progress: Progress | None = None,
                   clock: Callable[[], float] = time.perf_counter) -> LiveOutcome:
    """Replay every plan on one in-process vLLM engine (``settings``: `asp_cli.integrate.measure.InProcessSettings`).

    Ctrl-C stops it between or inside ``generate()`` calls; what finished is kept (``interrupted``).
    """
    vllm = load_vllm()
    llm = vllm.LLM(model=settings.model, tensor_parallel_size=settings.tensor_parallel_size)
    outcome = LiveOutcome([RunRecord(p.requests) for p in plans])
    try:
        for plan, record in zip(plans, outcome.records):
            if progress is not None:
                progress.start(plan.name, plan.requests)
            _run_plan(llm, vllm, plan, record, instances, progress, clock)
    except (KeyboardInterrupt, Interrupted):
        outcome.interrupted = True
    return outcome


def _run_plan(llm: Any, vllm: Any, plan: RequestPlan, record: RunRecord, instances: int,
              progress: Progress | None, clock: Callable[[], float]) -> None:
    n = plan.samples_per_prompt
    clocks = np.zeros(instances)
    for first, end, planned in plan.minibatches():
        k = int(np.argmin(clocks)) if plan.dispatch == "free" else planned
        requests = range(first * n, end * n)
        prompts, params = [], []
        for i in requests:
            row, sample = divmod(i, n)
            length = int(plan.lengths[row, sample])
            prompt = plan.prompt(row)
            prompts.append(prompt if isinstance(prompt, str) else {"prompt_token_ids": prompt})
            params.append(vllm.SamplingParams(n=1, max_tokens=length, min_tokens=length, ignore_eos=True,
                                              temperature=1.0))
        start = clock()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        elapsed = clock() - start
        for i, out in zip(requests, outputs):
            first_s, finish_s = _offsets(out, elapsed)
            generated = out.outputs[0].token_ids if getattr(out, "outputs", None) else None
            prompt_ids = getattr(out, "prompt_token_ids", None)
            record.store(i, k, Completion(
                send_s=float(clocks[k]), first_token_s=None if first_s is None else float(clocks[k] + first_s),
                finish_s=float(clocks[k] + finish_s), prompt_tokens=None if prompt_ids is None else len(prompt_ids),
                completion_tokens=None if generated is None else len(generated), finish_reason=None, attempts=1))
        clocks[k] += elapsed
        if progress is not None:
            progress.advance(len(requests))


def _offsets(out: Any, elapsed: float) -> tuple[float | None, float]:
    """First-token and finish offsets of one request from vLLM's metrics, where the version reports them."""
    metrics = getattr(out, "metrics", None)
    arrival = getattr(metrics, "arrival_time", None)
    first = getattr(metrics, "first_token_time", None)
    finished = getattr(metrics, "finished_time", None) or getattr(metrics, "last_token_time", None)
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (arrival, first, finished)):
        return None, elapsed
    return max(first - arrival, 0.0), min(max(finished - arrival, 0.0), elapsed)
