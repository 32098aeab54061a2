"""`asp calibrate`: the fit recovers known step-model parameters from exact (virtual-clock) timelines and stays
close under timing noise; the preset it writes loads in `asp schedule` and `asp simulate`; errors."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from _replay import small  # noqa: F401 - fixture
from fake_openai import FakeServer, StepModel, virtual_timeline
from typer.testing import CliRunner

from asp_cli.cli.main import app
from asp_cli.costmodel import load_preset
from asp_cli.errors import ExitCode, InputError
from asp_cli.integrate.calibrate import probe_plan
from asp_cli.integrate.costfit import fit_timeline
from asp_cli.integrate.timings import COLUMNS, write_timeline

from util import SAMPLE_PROMPTS

runner = CliRunner()
BASE = load_preset("h100-qwen2.5-7b")
# Known parameters: t_w / c puts the knee at 160 live sequences, inside the probe's batches of up to 256.
TRUTH = StepModel(overhead_s=2e-4, weight_read_s=8e-3, compute_s_per_token=5e-5, kv_s_per_token=1.5e-7)
KV_CACHE_TOKENS = 400_000


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def virtual_frame(model: StepModel, *, instances: int = 2, streaming: int | None = None, jitter: float = 0.0,
                  observe_noise_s: float = 0.0) -> pl.DataFrame:
    """The probe workload run on the fake engine's virtual clock: a timeline with exact (or noisy) times."""
    plan = probe_plan(instances, max_batch=256, response_tokens=200)
    rng = np.random.default_rng(7)
    rows = []
    for k in range(instances):
        idx = np.flatnonzero(plan.instance == k)
        arrivals = [(0.0, int(plan.prompt_tokens[i]), int(plan.lengths[i, 0])) for i in idx]
        minibatches = plan.minibatch[idx]
        sizes = [int(np.sum(minibatches == m)) for m in dict.fromkeys(minibatches.tolist())]
        times = virtual_timeline(model, arrivals, blocking_groups=None if streaming else sizes, in_flight=streaming,
                                 step_jitter=jitter, seed=k)
        for i, (s, f, e) in zip(idx, times):
            if observe_noise_s:  # the client sees each event a little late
                f += abs(rng.normal(0, observe_noise_s))
                e = max(e + abs(rng.normal(0, observe_noise_s)), f)
            rows.append({"arrangement": "probe", "run": 0, "seq": int(plan.seq[i]), "epoch": 0,
                         "prompt_id": plan.prompt_id[i], "sample": 0, "instance": k, "server": f"s{k}",
                         "minibatch": int(plan.minibatch[i]), "forced_tokens": int(plan.lengths[i, 0]),
                         "planned_prompt_tokens": int(plan.prompt_tokens[i]), "send_s": s, "first_token_s": f,
                         "finish_s": e, "prompt_tokens": int(plan.prompt_tokens[i]),
                         "completion_tokens": int(plan.lengths[i, 0]), "attempts": 1, "simulated_send_s": 0.0,
                         "simulated_finish_s": 0.0})
    return pl.DataFrame(rows, schema=COLUMNS)


def metadata(frame: pl.DataFrame, engine: str = "blocking", in_flight: int | None = None) -> dict:
    return {"engine": engine, "max_in_flight": in_flight, "instances": 2, "preset": "h100-qwen2.5-7b",
            "servers": [{"url": "s0", "kv_cache_tokens": KV_CACHE_TOKENS}] * 2,
            "arrangements": [{"arrangement": "probe", "dispatch": "planned", "requests": frame.height}]}


def close(value, truth, rel):
    return abs(value / truth - 1.0) <= rel


def test_fit_recovers_known_parameters_from_exact_timings():
    fit = fit_timeline(virtual_frame(TRUTH), BASE)
    # t_o is kept from the base preset (0.2 ms, the truth here), so the rest is identified exactly.
    assert fit.overhead_s == BASE.step_overhead_s == TRUTH.overhead_s
    assert close(fit.weight_read_s, TRUTH.weight_read_s, 0.005)
    assert close(fit.compute_s_per_token, TRUTH.compute_s_per_token, 0.005)
    assert close(fit.kv_s_per_token, TRUTH.kv_s_per_token, 0.005)
    assert close(fit.prefill_s_per_token, TRUTH.compute_s_per_token, 0.005)
    assert close(fit.knee_live, TRUTH.weight_read_s / TRUTH.compute_s_per_token, 0.005)
    assert fit.decode_rel_rmse < 0.002 and fit.prefill_rel_rmse < 0.002
    assert fit.max_num_seqs is None  # nothing waited at the peak


def test_fit_sees_the_engine_cap_and_no_compute_bound_step():
    capped = StepModel(**{**TRUTH.__dict__, "max_num_seqs": 128})
    fit = fit_timeline(virtual_frame(capped), BASE)
    assert fit.max_num_seqs == 128 and fit.knee_live is None  # 128 live never passes the knee at 160
    assert close(fit.weight_read_s, TRUTH.weight_read_s, 0.01) and close(fit.kv_s_per_token, TRUTH.kv_s_per_token, 0.01)
    assert close(fit.compute_s_per_token, TRUTH.compute_s_per_token, 0.01)  # from prefill
    assert any("compute term comes from prefill" in note for note in fit.notes)


def test_fit_on_a_streaming_timeline():
    fit = fit_timeline(virtual_frame(TRUTH, streaming=120), BASE)  # under the knee: memory bound
    assert close(fit.kv_s_per_token, TRUTH.kv_s_per_token, 0.005)
    assert close(fit.prefill_s_per_token, TRUTH.compute_s_per_token, 0.005)
    assert close(fit.weight_read_s, TRUTH.weight_read_s, 0.005)
    assert fit.knee_live is None and fit.decode_rel_rmse < 0.002


def test_fit_stays_close_under_step_jitter_and_observation_noise():
    # Each step 5% slower or faster at random, and every event seen up to a few ms late.
    fit = fit_timeline(virtual_frame(TRUTH, jitter=0.05, observe_noise_s=0.001), BASE)
    assert close(fit.weight_read_s, TRUTH.weight_read_s, 0.03)
    assert close(fit.kv_s_per_token, TRUTH.kv_s_per_token, 0.05)
    assert close(fit.compute_s_per_token, TRUTH.compute_s_per_token, 0.10)
    assert close(fit.prefill_s_per_token, TRUTH.compute_s_per_token, 0.05)


def test_calibrate_writes_a_preset_that_schedule_and_simulate_take(tmp_path, small):  # noqa: F811
    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "timeline.parquet"
    write_timeline(frame, metadata(frame), timeline)
    out = tmp_path / "preset.json"
    result = invoke("calibrate", timeline, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    preset = load_preset(out)
    fit = document["fit"]
    # The derived figures of the preset are the fitted ones (--json gives them to 6 significant digits, the file in
    # full); the KV capacity is the one the servers reported.
    assert close(preset.weight_read_s, fit["weight_read_s"], 1e-5)
    assert close(preset.kv_s_per_token, fit["kv_s_per_token"], 1e-5)
    assert close(preset.compute_s_per_token, fit["compute_s_per_token"], 1e-5)
    assert preset.kv_capacity_tokens == pytest.approx(KV_CACHE_TOKENS, abs=1)
    assert preset.step_overhead_s == fit["overhead_s"] and preset.params == BASE.params
    # The check: the same run simulated with each preset, against the measured wall time.
    check = document["check"][0]
    assert abs(check["calibrated_error"]) < 0.01 < abs(check["base_error"])
    assert "Check, probe: measured" in result.stderr and "--preset" in result.stderr
    # The preset feeds back into asp schedule and asp simulate.
    schedule = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", schedule, "--preset", out, "--quiet")
    assert result.exit_code == 0, result.output
    result = invoke("simulate", small["schedule"], "--preset", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["preset"] == preset.name == "h100-qwen2.5-7b+calibrated"
    # A calibration file can be the base of the next one (its own fields kept).
    again = tmp_path / "again.json"
    result = invoke("calibrate", timeline, "-o", again, "--base", out, "--max-num-seqs", "77", "--quiet")
    # 77 sequences at most, where the probe ran 256 at once: the check simulates the run 9% slower than measured,
    # worse than the base's fit, so nothing is written unless asked for.
    assert result.exit_code == ExitCode.CHECK_FAILED and f"keep --preset {out}," in result.stderr, result.output
    assert not again.exists()
    result = invoke("calibrate", timeline, "-o", again, "--base", out, "--max-num-seqs", "77", "--quiet",
                    "--keep-worse")
    assert result.exit_code == 0, result.output
    assert load_preset(again).max_num_seqs == 77


def test_calibrate_fits_the_trainer_from_measured_steps(tmp_path):
    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, metadata(frame), timeline)
    steps = tmp_path / "steps.csv"
    steps.write_text("tokens,step_s\n" + "".join(f"{t},{3.0 + 2e-5 * t}\n" for t in (100_000, 250_000, 400_000)))
    out = tmp_path / "p.json"
    result = invoke("calibrate", timeline, "-o", out, "--train-steps", steps, "--quiet")
    assert result.exit_code == 0, result.output
    preset = load_preset(out)
    assert preset.train_fixed_s == pytest.approx(3.0) and preset.train_per_token_s == pytest.approx(2e-5)
    result = invoke("calibrate", timeline, "-o", tmp_path / "shown.json", "--train-steps", steps)
    assert "trainer (--train-steps): 3 s a step + 2e-05 s a token" in result.stderr
    # Alone (a MindSpeed newcomer had step timings and no servers to replay on): the trainer only, the base's
    # decoding kept, said so.
    alone = tmp_path / "alone.json"
    result = invoke("calibrate", "-o", alone, "--train-steps", steps, "--base", "ascend910b-qwen2.5-7b", "--json")
    assert result.exit_code == 0, result.output
    assert ("Fitted the trainer to " in result.stderr and "3 s a step + 2e-05 s a token (decoding as "
            "ascend910b-qwen2.5-7b, not measured)" in result.stderr)
    preset, base = load_preset(alone), load_preset("ascend910b-qwen2.5-7b")
    assert preset.train_fixed_s == pytest.approx(3.0) and preset.train_per_token_s == pytest.approx(2e-5)
    assert preset.eta_bandwidth == base.eta_bandwidth and preset.kv_capacity_tokens == base.kv_capacity_tokens
    assert json.loads(result.stdout)["fit"] is None
    refused = invoke("calibrate", "-o", tmp_path / "none.json")
    assert refused.exit_code == 4 and "(or --train-steps alone to fit the trainer only, " in refused.stderr


def test_calibrate_without_servers_keeps_the_engine_limits_it_is_given(tmp_path):
    """A MindSpeed-RL newcomer's vLLM runs beside the trainer (gpu_memory_utilization 0.4, max_num_seqs 1024): they
    gave its logged KV cache size and max_num_seqs with --train-steps, and the preset written kept the base's (704,000
    tokens, 256 sequences) without a word; alone, without --train-steps, the two were refused."""
    steps = tmp_path / "steps.csv"
    steps.write_text("tokens,step_s\n" + "".join(f"{t},{3.0 + 2e-5 * t}\n" for t in (100_000, 250_000, 400_000)))
    both = tmp_path / "both.json"
    result = invoke("calibrate", "-o", both, "--train-steps", steps, "--base", "ascend910b-qwen2.5-7b",
                    "--kv-cache-tokens", 146_000, "--max-num-seqs", 1024)
    assert result.exit_code == 0, result.output
    preset = load_preset(both)
    assert (preset.kv_capacity_tokens, preset.max_num_seqs) == (146_000, 1024)
    assert preset.train_fixed_s == pytest.approx(3.0) and preset.eta_bandwidth == load_preset("ascend910b-qwen2.5-7b").eta_bandwidth
    assert "KV capacity 146,000 tokens (given); max_num_seqs 1,024 (given)" in result.stderr
    alone = tmp_path / "alone.json"
    result = invoke("calibrate", "-o", alone, "--base", "ascend910b-qwen2.5-7b", "--kv-cache-tokens", 146_000, "--json")
    assert result.exit_code == 0, result.output
    preset = load_preset(alone)
    assert (preset.kv_capacity_tokens, preset.max_num_seqs, preset.train_fixed_s) == (
        146_000, 256, load_preset("ascend910b-qwen2.5-7b").train_fixed_s)
    assert json.loads(result.stdout)["kv_capacity_tokens"] == {"value": 146_000, "source": "given"}
    assert "max_num_seqs 256 (base) (decoding as ascend910b-qwen2.5-7b, not measured)" in result.stderr


def test_calibrate_refuses_probe_options_without_servers(tmp_path):
    """A hostile-input round: --probe-max-batch 5000 and --probe-tokens 0 were accepted and ignored."""
    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, metadata(frame), timeline)
    for option in ("--probe-max-batch", "--probe-tokens"):
        result = invoke("calibrate", timeline, "-o", tmp_path / "c.json", option, 5)
        assert result.exit_code == 4 and "shape the probe sent to --servers" in result.stderr
    assert not (tmp_path / "c.json").exists()


def test_calibrate_refuses_to_write_over_its_base_preset(tmp_path):
    """-o cal.json --base cal.json --force replaced the base it read (exit 0), by any spelling of the path."""
    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, metadata(frame), timeline)
    base = tmp_path / "cal.json"
    assert invoke("calibrate", timeline, "-o", base, "--quiet").exit_code == 0
    before = base.read_bytes()
    (tmp_path / "link.json").symlink_to(base)
    for out in (base, tmp_path / "." / "sub" / ".." / "cal.json", tmp_path / "link.json"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        result = invoke("calibrate", timeline, "-o", out, "--base", base, "--force", "--quiet")
        assert result.exit_code == 7 and "is also an input" in result.stderr, (out, result.stderr)
    assert base.read_bytes() == before


@pytest.mark.parametrize("value", ["-4.1", "nan", "0", "x"])
def test_a_trainer_step_that_is_no_measurement_is_refused_with_its_row(tmp_path, value):
    """Negative times were fitted into a plausible-looking trainer cost; a NaN row was dropped silently."""
    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, metadata(frame), timeline)
    steps = tmp_path / "steps.csv"
    steps.write_text(f"tokens,step_s\n1000,1.5\n2000,{value}\n3000,2.5\n")
    result = invoke("calibrate", timeline, "-o", tmp_path / "p.json", "--train-steps", steps)
    assert result.exit_code == 3 and "steps.csv: row 2 (after the header): a trainer step needs 'tokens' from 0 " \
        "to 1e+12 and 'step_s' from 0.001 to 1e+06 seconds" in result.stderr, result.output
    assert not (tmp_path / "p.json").exists()



def test_trainer_steps_of_mixed_kinds_are_read_as_the_file_holds_them(tmp_path):
    """An audit: a `tokens` column of numbers beside text ("250000") kept each number behind the reader's tag, which
    no cast read: every such row was refused, its message showing the tag. Read as the other readers do."""
    from asp_cli.integrate.costfit import fit_train_steps
    from asp_cli.reading import read_table

    steps = tmp_path / "steps.jsonl"
    rows = [{"tokens": 100_000, "step_s": 5.0}, {"tokens": "250000", "step_s": 8.0}, {"tokens": 400_000, "step_s": 11.0}]
    steps.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert fit_train_steps(read_table(steps), str(steps)) == pytest.approx((3.0, 2e-5))
    steps.write_text("".join(json.dumps(r) + "\n" for r in [*rows, {"tokens": True, "step_s": 2.0}]))
    with pytest.raises(InputError, match=r"steps.jsonl:4: a trainer step needs .* \(got tokens 'true', ") as caught:
        fit_train_steps(read_table(steps), str(steps))
    assert "\x00" not in str(caught.value)


def test_calibrate_runs_on_a_measured_http_replay_and_a_probe_of_its_own(small, tmp_path):  # noqa: F811
    timeline = tmp_path / "t.parquet"
    own = tmp_path / "own.json"
    own.write_text(json.dumps({"base": "a100-llama2-7b", "max_num_seqs": 64}))
    with FakeServer(time_scale=0.05) as a, FakeServer(time_scale=0.05) as b:
        result = invoke("replay", small["schedule"], small["prompts"], "--lengths", small["lengths"], "--servers",
                        f"{a.url},{b.url}", "-o", timeline, "--warmup", "0", "--preset", own)
        assert result.exit_code == 0, result.output
        probe = tmp_path / "probe.parquet"
        # On a real clock under load the fit may predict the probe worse than the base: written all the same here.
        result = invoke("calibrate", "-o", tmp_path / "probe.json", "--servers", f"{a.url},{b.url}",
                        "--probe-max-batch", "8", "--probe-tokens", "12", "--probe-timeline", probe, "--keep-worse")
        assert result.exit_code == 0, result.output
    assert pl.read_parquet(probe).height == 2 * (1 + 2 + 4 + 8)
    assert load_preset(tmp_path / "probe.json").kv_capacity_tokens == pytest.approx(123_456, abs=1)
    # The real-time fake is not the step model on a steady clock; the fit must still produce a usable preset.
    result = invoke("calibrate", timeline, "-o", tmp_path / "p.json", "--json", "--keep-worse")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["base"] == f"a100-llama2-7b+{own.name}"  # the preset the replay simulated with
    calibrated = load_preset(tmp_path / "p.json")
    assert calibrated.weight_read_s > 0 and calibrated.params == load_preset("a100-llama2-7b").params


def test_calibrate_refuses_what_it_cannot_fit(tmp_path):
    frame = virtual_frame(TRUTH).with_columns(pl.lit(None, pl.Float64).alias("first_token_s"))
    plain = tmp_path / "plain.parquet"
    write_timeline(frame, metadata(frame), plain)
    result = invoke("calibrate", plain, "-o", tmp_path / "p.json")
    assert result.exit_code == ExitCode.BAD_INPUT and "replay with streaming" in result.stderr
    assert result.stderr.startswith(f"Error: {plain}: the timeline has fewer than")  # named, as every input error
    other = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(other)
    result = invoke("calibrate", other, "-o", tmp_path / "p.json")
    assert result.exit_code == ExitCode.BAD_INPUT and "not an asp replay timeline" in result.stderr
    result = invoke("calibrate", tmp_path, "-o", tmp_path / "p.json")
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert result.stderr == f"Error: {tmp_path}: is a folder, not a timeline file; give the file `asp replay -o` wrote\n"
    result = invoke("calibrate", plain, "-o", tmp_path / "p.json", "--servers", "http://127.0.0.1:9/v1")
    assert result.exit_code == ExitCode.BAD_SETTINGS and "not both" in result.stderr
    neither = invoke("calibrate", "-o", tmp_path / "p.json")  # it said "(not both)" of neither
    assert neither.exit_code == ExitCode.BAD_SETTINGS and neither.stderr.strip().endswith(
        "to measure a probe run (or --train-steps alone to fit the trainer only, --kv-cache-tokens and --max-num-seqs "
        "alone to give the engine's limits)")
    assert not (tmp_path / "p.json").exists()


def test_a_fit_that_predicts_every_run_worse_than_its_base_is_not_written(tmp_path, monkeypatch):
    """A newcomer's calibration printed "calibrated (-97.8%)" and "keep the base preset", wrote the preset and
    exited 0: a pipeline (`asp calibrate -o p.json && asp schedule --preset p.json`) went on with it."""
    import asp_cli.integrate.calibrate as calibrate_module

    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, metadata(frame), timeline)
    checked = calibrate_module._check
    monkeypatch.setattr(calibrate_module, "_check", lambda *a: [
        {**row, "calibrated_error": -0.978, "base_error": 0.05} for row in checked(*a)])
    out = tmp_path / "p.json"
    result = invoke("calibrate", timeline, "-o", out)
    assert result.exit_code == ExitCode.CHECK_FAILED == 1, result.output
    assert result.stderr.startswith(f"Error: {out}: not written: the calibrated preset simulates every measured run "
                                    "worse than its base h100-qwen2.5-7b does (probe: -97.8% calibrated against "
                                    "+5.0% with the base); keep --preset h100-qwen2.5-7b")
    assert "--keep-worse" in result.stderr and len(result.stderr.strip().splitlines()) == 1 and not out.exists()
    result = invoke("calibrate", timeline, "-o", out, "--keep-worse")
    assert result.exit_code == 0, result.output
    assert "keep the base preset" in result.stderr and load_preset(out).name == "h100-qwen2.5-7b+calibrated"
    # Better on one run of several is not worse on every run: written as before.
    monkeypatch.setattr(calibrate_module, "_check", lambda *a: [
        {**row, "calibrated_error": e, "base_error": 0.05} for row in checked(*a) for e in (-0.5, 0.01)])
    assert invoke("calibrate", timeline, "-o", out, "--force").exit_code == 0


def test_a_timeline_of_an_interrupted_replay_is_said_so(tmp_path):
    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, {**metadata(frame), "complete": False}, timeline)
    result = invoke("calibrate", timeline, "-o", tmp_path / "p.json")
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())
    assert f"Note: the timeline is of an interrupted replay ({frame.height:,} requests measured before it stopped)" \
        in said
    # Its arrangement was replayed whole before the stop: checked, and said so (it read "no arrangement" before).
    assert "only the arrangement(s) replayed whole before it (probe) are checked" in said
    cut = frame.head(frame.height - 1)  # the last request never finished: nothing to check whole
    write_timeline(cut, {**metadata(frame), "complete": False}, tmp_path / "cut.parquet")
    result = invoke("calibrate", tmp_path / "cut.parquet", "-o", tmp_path / "c.json")
    assert result.exit_code == 0, result.output
    assert "no arrangement can be checked whole" in " ".join(result.stderr.split())
    write_timeline(frame, metadata(frame), tmp_path / "whole.parquet")
    assert "interrupted" not in invoke("calibrate", tmp_path / "whole.parquet", "-o", tmp_path / "q.json").stderr


@pytest.mark.parametrize("args, words", [
    # Filled the memory building the probe's plan (killed, exit 137), before anything was sent.
    (["--servers", "http://127.0.0.1:9/v1", "--probe-max-batch", "9999999999"],
     "--probe-max-batch must be a whole number from 1 to 4096 (got 9999999999)"),
    (["--servers", "http://127.0.0.1:9/v1", "--probe-tokens", str(10**20)],  # exit 70: beyond int64
     "--probe-tokens must be a whole number from 2 to 2147483647"),
    # Refused as a field of "the calibration file", which the user never wrote; now named as the option.
    (["TIMELINE", "--max-num-seqs", str(10**14)], "--max-num-seqs must be a whole number from 1 to 2147483647"),
    (["TIMELINE", "--kv-cache-tokens", str(10**14)], "--kv-cache-tokens must be a whole number from 1 to 2147483647"),
    (["TIMELINE", "--kv-cache-tokens", "0"], "--kv-cache-tokens must be a whole number from 1 to 2147483647 (got 0)"),
])
def test_calibrate_counts_are_refused_as_the_options_they_are(tmp_path, args, words):
    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, metadata(frame), timeline)
    result = invoke("calibrate", *[timeline if a == "TIMELINE" else a for a in args], "-o", tmp_path / "p.json")
    assert result.exit_code == ExitCode.BAD_SETTINGS, result.output
    assert result.stderr.startswith(f"Error: {words}") and result.stderr.count("\n") == 1
    assert "calibration file" not in result.stderr and not (tmp_path / "p.json").exists()


def test_a_probe_over_the_open_file_limit_names_calibrates_own_option(tmp_path, monkeypatch):
    """It said "or lower --max-in-flight", an option `asp calibrate` does not have."""
    resource = pytest.importorskip("resource")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 1024))
    monkeypatch.setattr(resource, "setrlimit", lambda which, limits: None)  # the test process keeps its own
    result = invoke("calibrate", "-o", tmp_path / "p.json", "--servers", "http://127.0.0.1:9/v1,http://127.0.0.1:10/v1",
                    "--probe-max-batch", "4096")
    assert result.exit_code == ExitCode.BAD_SETTINGS, result.output
    assert result.stderr == ("Error: the replay holds up to 8192 connections but this process may open 1024 files; "
                             "raise the limit (ulimit -n 8256) or lower --probe-max-batch\n")


def test_a_timeline_with_impossible_times_is_refused_and_a_preset_that_would_not_load_is_not_written(
        tmp_path, monkeypatch):
    """A hostile-input audit found NaN times crashing the fit (exit 70) and a preset written before it was found
    invalid (left on disk after exit 4)."""
    frame = virtual_frame(TRUTH)
    for name, broken in (("nan", frame.with_columns(pl.lit(float("nan")).alias("finish_s"))),
                         ("late", frame.with_columns((pl.col("finish_s") + 1.0).alias("first_token_s"))),
                         ("inf", frame.with_columns(pl.lit(float("inf")).alias("first_token_s")))):
        path = tmp_path / f"{name}.parquet"
        write_timeline(broken, metadata(broken), path)
        result = invoke("calibrate", path, "-o", tmp_path / f"{name}.json")
        assert result.exit_code == ExitCode.BAD_INPUT and f"{name}.parquet: " in result.stderr, result.output
        assert "time" in result.stderr and not (tmp_path / f"{name}.json").exists()
    good = tmp_path / "good.parquet"
    write_timeline(frame, metadata(frame), good)
    import asp_cli.integrate.calibrate as calibrate_module

    fitted = calibrate_module.preset_document  # a fit whose preset is out of range (as a hostile timeline made)
    monkeypatch.setattr(calibrate_module, "preset_document",
                        lambda *a, **k: {**fitted(*a, **k), "hbm_bytes": 2.98e18})
    result = invoke("calibrate", good, "-o", tmp_path / "p.json")
    assert result.exit_code == ExitCode.BAD_SETTINGS and "not written to" in result.stderr, result.output
    assert not (tmp_path / "p.json").exists()



def test_a_kv_read_the_timeline_did_not_pin_keeps_the_base_models(tmp_path):
    """A real-clock probe of 12-token answers (CI under load) once fitted 7e12 bytes of KV a token, which made a
    cache of 1.2e18 bytes and a preset that would not load: KV bytes a token are the model's, so a fit far from the
    base's keeps the base's, and says so."""
    import dataclasses

    from asp_cli.integrate.costfit import KV_PLAUSIBLE, preset_document

    fit = fit_timeline(virtual_frame(TRUTH), BASE)
    wild = dataclasses.replace(fit, kv_s_per_token=fit.kv_s_per_token * KV_PLAUSIBLE * 1e6, notes=list(fit.notes))
    document = preset_document(BASE, {"base": BASE.name}, wild, kv_cache_tokens=KV_CACHE_TOKENS, max_num_seqs=None,
                               train=None, name="x", description="x")
    assert document["kv_bytes_per_token"] == BASE.kv_bytes_per_token
    assert any("did not pin the KV read" in note for note in wild.notes)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document))
    assert load_preset(path).kv_capacity_tokens == pytest.approx(KV_CACHE_TOKENS, abs=1)
    kept = preset_document(BASE, {"base": BASE.name}, fit, kv_cache_tokens=KV_CACHE_TOKENS, max_num_seqs=None,
                           train=None, name="x", description="x")
    assert kept["kv_bytes_per_token"] != BASE.kv_bytes_per_token  # a fit that did pin it is its own


def test_a_kv_term_that_did_not_show_keeps_the_models_bytes_and_an_impossible_weight_read_is_said(tmp_path):
    """A fake server's timeline: the KV term did not show ("kept the base preset's"), but the written preset's KV
    read was 800-6,000 times the base's, its bytes moved by the fitted bandwidth and then called "fitted"; and a
    weight read far faster than the GPU allows (eta_bandwidth 4,997) was written without a word (a hostile-input
    round)."""
    import dataclasses

    from asp_cli.integrate.costfit import preset_document

    fit = fit_timeline(virtual_frame(TRUTH), BASE)
    kept = dataclasses.replace(fit, weight_read_s=fit.weight_read_s / 5000, kv_s_per_token=BASE.kv_s_per_token,
                               sources={**fit.sources, "kv_s_per_token": "base"}, notes=[])
    document = preset_document(BASE, {"base": BASE.name}, kept, kv_cache_tokens=KV_CACHE_TOKENS, max_num_seqs=None,
                               train=None, name="x", description="x")
    assert document["kv_bytes_per_token"] == BASE.kv_bytes_per_token
    assert not any("did not pin the KV read" in note for note in kept.notes)
    [note] = kept.notes
    assert "are faster than the base's bandwidth allows" in note and "eta_bandwidth" in note
    from asp_cli.cli.replay import _untrusted

    # `asp calibrate` says it as a warning, under --quiet too, not a note among the figures (a hostile round)
    assert _untrusted(note) and not _untrusted("no decode step was compute bound (too few live sequences)")
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document))
    written = load_preset(path)
    # the KV read follows the fitted bandwidth, as the weight read does: the same ratio to the base's
    assert written.kv_s_per_token / BASE.kv_s_per_token == pytest.approx(written.weight_read_s / BASE.weight_read_s)
    # a plausible fit says nothing of the bandwidth
    plain = dataclasses.replace(fit, notes=[])
    preset_document(BASE, {"base": BASE.name}, plain, kv_cache_tokens=KV_CACHE_TOKENS, max_num_seqs=None, train=None,
                    name="x", description="x")
    assert not any("faster than" in note for note in plain.notes)


def test_trainer_steps_beyond_any_step_or_without_a_cost_per_token_are_refused(tmp_path):
    """A hostile-input audit: 1e30 tokens or 1e-300 s wrote a preset of a trainer costing 0 s; steps that got shorter
    with more tokens fitted "12 s + 0 s a token" without a word."""
    steps = tmp_path / "steps.csv"
    for rows, said in (("1e30,10\n200000,12\n", "a trainer step needs 'tokens' from 0 to 1e+12"),
                       ("100000,1e-300\n200000,12\n", "'step_s' from 0.001 to 1e+06 seconds"),
                       ("100,10\n200,5\n300,1\n", "the steps do not take longer with more tokens (fitted -0.045 s a "
                                                     "token)")):
        steps.write_text("tokens,step_s\n" + rows)
        result = invoke("calibrate", "-o", tmp_path / "p.json", "--train-steps", steps)
        assert result.exit_code == 3 and said in result.stderr, result.output
        assert not (tmp_path / "p.json").exists()


def test_calibrates_messages_name_its_own_options(tmp_path):
    """--base of a missing file said --preset; a bad --train-steps row said to pass --on-bad-row: neither is
    asp calibrate's."""
    steps = tmp_path / "steps.jsonl"
    steps.write_text('{"tokens": 1, "step_s": 2}\n{"tokens": 3, "step_s": \n{"tokens": 5, "step_s": 6}\n')
    bad_row = invoke("calibrate", "-o", tmp_path / "p.json", "--train-steps", steps)
    assert bad_row.exit_code == 3 and bad_row.stderr.strip().endswith("; fix the row or drop it"), bad_row.output
    missing = invoke("calibrate", "-o", tmp_path / "p.json", "--train-steps", steps, "--base", tmp_path / "no.json")
    assert missing.exit_code != 0 and "--base " in missing.stderr and "--preset" not in missing.stderr


def _damaged(timeline, document=None, **columns):
    """``timeline`` with its metadata document replaced (JSON text) or columns edited, as a hand or a disk left it."""
    import pyarrow.parquet as pq

    table = pq.read_table(timeline)
    frame = pl.from_arrow(table).with_columns(**columns)
    meta = table.schema.metadata if document is None else {b"asp.timeline": document.encode()}
    out = timeline.with_name("bad.parquet")
    pq.write_table(frame.to_arrow().replace_schema_metadata(meta), out)
    return out


def test_a_damaged_timeline_is_refused_naming_file_and_field(tmp_path):
    """A hostile-input round on `asp calibrate`: damaged metadata was exit 70 (AttributeError, ValueError, TypeError;
    times of 1e300 s "SVD did not converge"); a send at -30 s, 2**62 completion tokens or max_in_flight 1.5 wrote a
    preset or judged it on them; instance 99 of 2 was told to pass --instances, which calibrate has not."""
    frame = virtual_frame(TRUTH, streaming=64)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, metadata(frame, engine="streaming", in_flight=64), timeline)
    import pyarrow.parquet as pq

    good = json.loads(pq.read_schema(timeline).metadata[b"asp.timeline"])
    first = pl.int_range(pl.len()) == 0
    cases = [({"document": "[]"}, "damaged asp timeline metadata (a list, where a JSON object"),
             ({"document": "null"}, "damaged asp timeline metadata (null, where"),
             ({"document": json.dumps({**good, "instances": "x"})}, "field 'instances' must be a whole number"),
             ({"document": json.dumps({**good, "servers": 5})}, "field 'servers' must be a list of objects, not 5"),
             ({"document": json.dumps({**good, "max_in_flight": 1.5})}, "field 'max_in_flight' must be a whole number"),
             ({"document": json.dumps({**good, "max_in_flight": -3})}, "field 'max_in_flight' must be a whole number"),
             ({"finish_s": pl.col("finish_s") * 1e300, "first_token_s": pl.col("first_token_s") * 1e300},
              "row 1: column 'finish_s' is"),
             ({"send_s": pl.when(first).then(-30.0).otherwise(pl.col("send_s"))}, "row 1: column 'send_s' is -30 "),
             ({"completion_tokens": pl.when(first).then(2**62).otherwise(pl.col("completion_tokens"))},
              "row 1: column 'completion_tokens' is 4,611,686,018,427,387,904"),
             ({"instance": pl.lit(99, pl.Int32)}, "row 1: column 'instance' is 99"),
             ({"instance": pl.lit(-1, pl.Int32)}, "row 1: column 'instance' is -1")]
    for edit, words in cases:
        bad = _damaged(timeline, **edit)
        result = invoke("calibrate", bad, "-o", tmp_path / "p.json", "--quiet")
        assert result.exit_code == ExitCode.BAD_INPUT, (edit, result.output)
        assert result.stderr.startswith(f"Error: {bad}: ") and words in result.stderr, (edit, result.stderr)
        assert result.stderr.strip().endswith("; record the timeline again with asp replay -o")
        assert result.stderr.count("\n") == 1 and not (tmp_path / "p.json").exists()


def test_a_recorded_preset_this_machine_cannot_load_is_refused_naming_base(tmp_path):
    """A timeline whose preset was "nope" (or a calibration file gone) was fitted from h100-qwen2.5-7b's hardware
    without a word."""
    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, {**metadata(frame), "preset": "nope", "preset_source": str(tmp_path / "gone.json")},
                   timeline)
    result = invoke("calibrate", timeline, "-o", tmp_path / "p.json", "--quiet")
    assert result.exit_code == ExitCode.BAD_SETTINGS, result.output
    assert result.stderr == (f"Error: {timeline}: the replay simulated with preset 'nope' (from "
                             f"'{tmp_path / 'gone.json'}'), which is neither a preset of this asp nor a file here; "
                             "pass --base with its calibration file, or the preset to fit from (h100-qwen2.5-7b, "
                             "h800-qwen2.5-7b, h200-qwen2.5-7b, a100-llama2-7b, ascend910b-qwen2.5-7b)\n")
    assert not (tmp_path / "p.json").exists()
    assert invoke("calibrate", timeline, "-o", tmp_path / "p.json", "--base", "a100-llama2-7b", "--quiet",
                  "--keep-worse").exit_code == 0
    unrecorded = tmp_path / "unrecorded.parquet"  # no record at all: the default, as before
    write_timeline(frame, {k: v for k, v in metadata(frame).items() if k != "preset"}, unrecorded)
    result = invoke("calibrate", unrecorded, "-o", tmp_path / "q.json", "--json", "--quiet")
    assert result.exit_code == 0 and json.loads(result.stdout)["base"] == "h100-qwen2.5-7b", result.output


def test_force_replaces_only_a_preset(tmp_path):
    """`-o tokenizer.json --force` replaced a Hugging Face tokenizer with a preset (a hostile-input round)."""
    from asp_cli import calibrate
    from asp_cli.errors import OutputError

    frame = virtual_frame(TRUTH)
    timeline = tmp_path / "t.parquet"
    write_timeline(frame, metadata(frame), timeline)
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text('{"version": "1.0", "added_tokens": [], "model": {"type": "BPE"}}')
    (tmp_path / "notes.json").write_text("my notes")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "config.json").write_text('{"eta_bandwidth": 0.5, "hidden_size": 4096}')
    for name, what in (("tokenizer.json", "a Hugging Face tokenizer: key 'added_tokens', which no preset has"),
                       ("notes.json", "not JSON"), ("list.json", "a JSON value that is not an object"),
                       ("config.json", "a JSON object with key 'hidden_size', which no preset has")):
        before = (tmp_path / name).read_bytes()
        result = invoke("calibrate", timeline, "-o", tmp_path / name, "--force", "--quiet")
        assert result.exit_code == ExitCode.OUTPUT, result.output
        assert result.stderr == (f"Error: {tmp_path / name} is not an asp cost preset ({what}), and asp calibrate "
                                 "writes one: --force replaces only a preset; name another output\n")
        assert (tmp_path / name).read_bytes() == before
    with pytest.raises(OutputError, match="is not an asp cost preset"):  # the Python twin, before any work
        calibrate(None, tokenizer, train_steps=tmp_path / "none.csv", force=True)
    # A preset, hand-written or calibrated, and an empty file are replaced as before.
    (tmp_path / "hand.json").write_text('{"base": "h100-qwen2.5-7b", "eta_bandwidth": 0.5}')
    (tmp_path / "empty.json").write_text("")
    for name in ("hand.json", "empty.json", "hand.json"):
        result = invoke("calibrate", timeline, "-o", tmp_path / name, "--force", "--quiet")
        assert result.exit_code == 0, result.output
        assert load_preset(tmp_path / name).name == "h100-qwen2.5-7b+calibrated"


def test_calibrating_a_calibrated_preset_again_names_each_part_once(tmp_path):
    """A preset made with --train-steps and --kv-cache-tokens ('+trainer+engine'), calibrated again from its file with
    either, grew its name each time ('+trainer+engine+trainer', then '+engine' more)."""
    steps = tmp_path / "steps.csv"
    steps.write_text("tokens,step_s\n" + "".join(f"{t},{3.0 + 2e-5 * t}\n" for t in (100_000, 250_000, 400_000)))
    first, second, third = (tmp_path / f"{name}.json" for name in ("first", "second", "third"))
    assert invoke("calibrate", "-o", first, "--train-steps", steps, "--kv-cache-tokens", 5000, "-q").exit_code == 0
    assert invoke("calibrate", "-o", second, "--base", first, "--train-steps", steps, "-q").exit_code == 0
    assert invoke("calibrate", "-o", third, "--base", second, "--kv-cache-tokens", 6000, "-q").exit_code == 0
    names = [json.loads(path.read_text())["name"] for path in (first, second, third)]
    assert names == ["h100-qwen2.5-7b+trainer+engine"] * 3, names
