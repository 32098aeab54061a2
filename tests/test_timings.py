"""The timeline's figures (the same definitions for measured and simulated runs) and its file checks."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from asp_cli.errors import InputError
from asp_cli.integrate.timings import COLUMNS, read_timeline, rollout_figures, write_timeline


def test_rollout_figures_on_hand_made_intervals():
    # Instance 0: [0, 4] and [1, 2] overlap, then [6, 8]: busy 6 s, last finish 8.
    # Instance 1: [0, 3]: busy 3 s, last finish 3.
    send = np.array([0.0, 1.0, 6.0, 0.0])
    finish = np.array([4.0, 2.0, 8.0, 3.0])
    figures = rollout_figures(send, finish, np.array([0, 0, 0, 1]), np.array([10, 20, 30, 40]))
    assert figures["wall_s"] == 8.0
    assert figures["instance_busy_s"] == [6.0, 3.0] and figures["instance_finish_s"] == [8.0, 3.0]
    assert figures["busy_fraction_mean"] == pytest.approx(4.5 / 8) and figures["busy_fraction_min"] == 3 / 8
    assert figures["finish_spread_s"] == 5.0
    assert figures["effective_batch"] == pytest.approx((4 + 1 + 2 + 3) / 9)  # request-seconds over busy seconds
    assert figures["response_tokens"] == 100 and figures["response_tokens_per_s"] == 12.5
    assert rollout_figures(np.zeros(0), np.zeros(0), np.zeros(0))["wall_s"] == 0.0


def test_a_timeline_round_trips_and_a_broken_one_is_refused(tmp_path):
    row = {name: None for name in COLUMNS}
    row.update(arrangement="asp", run=0, seq=0, epoch=0, prompt_id="a", sample=0, instance=0, server="s",
               minibatch=0, forced_tokens=5, planned_prompt_tokens=3, send_s=0.0, first_token_s=0.1, finish_s=0.5,
               attempts=1)
    path = tmp_path / "t.parquet"
    write_timeline(pl.DataFrame([row], schema=COLUMNS), {"engine": "blocking"}, path)
    timeline = read_timeline(path)
    assert timeline.frame.height == 1 and timeline.metadata["engine"] == "blocking"
    assert timeline.metadata["format"] == "asp.timeline"
    bad = tmp_path / "bad.parquet"
    write_timeline(pl.DataFrame([{**row, "finish_s": -1.0}], schema=COLUMNS), {}, bad)
    with pytest.raises(InputError, match="finish before they are sent"):
        read_timeline(bad)
    with pytest.raises(InputError, match="no such timeline file"):
        read_timeline(tmp_path / "missing.parquet")
    doubled = tmp_path / "doubled.parquet"  # every request twice: calibrate fitted twice the eta_flops, unsaid
    write_timeline(pl.DataFrame([row, {**row, "sample": 1}, row], schema=COLUMNS), {}, doubled)
    with pytest.raises(InputError, match=r"2 rows repeat a request \(run 0, seq 0, sample 0 is there more than once"):
        read_timeline(doubled)
