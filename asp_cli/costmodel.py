"""The cost model of rollout instances and the trainer, shared by the scheduler's estimates and the simulator.

Decode is memory-bandwidth bound: a step reads the weights once and the KV cache of every live sequence
(the additive roofline of docs/cost-model.md, after llm-analysis and Vidur):

    t_step(b, ctx) = t_o + max(W / BW', 2·N·b / F') + kv_bytes · ctx / BW'

where b is the number of live sequences, ctx their summed context, BW' = eta_bw·BW and F' = eta_f·F.
Prefill is compute bound: t_prefill(P) = 2·N·P / F'. Presets hold public hardware and model figures; every
field can be overridden from a JSON calibration file (`load_preset`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asp_cli import limits
from asp_cli.errors import SettingsError, missing_hint, stdin_said

# The range of every number a preset holds: (lowest, highest, whether the lowest itself is allowed). Outside
# them a value is a typo or a poisoned file, and its costs would be NaN, infinite or negative (zero bandwidth
# divides by zero; 1e300 bytes of weights overflow). The bounds leave room for any real GPU and model, and for
# what `asp calibrate` fits against a fake server in the tests (efficiencies in the millions, a gigabyte of KV
# per token); the decode costs they give must then also be finite (`HardwarePreset.__post_init__`).
_RANGES: dict[str, tuple[float, float, bool]] = {
    "weights_bytes": (0.0, 1e18, True),
    "params": (0.0, 1e18, True),
    "kv_bytes_per_token": (0.0, 1e15, False),
    "bandwidth_bytes_per_s": (0.0, 1e18, False),
    # An efficiency is a fraction of the nominal figure on the preset's own GPU, but `asp calibrate` fits it
    # against the base preset's figures, so a faster GPU than the base's reads above 1.
    "eta_bandwidth": (0.0, 1e12, False),
    "flops_per_s": (0.0, 1e21, False),
    "eta_flops": (0.0, 1e12, False),
    "hbm_bytes": (0.0, 1e18, False),
    "gpu_memory_utilization": (0.0, 1.0, False),
    "activation_reserve_bytes": (0.0, 1e18, True),
    "step_overhead_s": (0.0, 1e6, True),
    "max_num_seqs": (1.0, 2**31 - 1, True),
    "train_fixed_s": (0.0, 1e9, True),
    "train_per_token_s": (0.0, 1e6, True),
    "weight_sync_s": (0.0, 1e9, True),
}
MAX_STEP_COST_S = 1e9  # a decode step's fixed, per-sequence or per-token cost beyond this is no hardware


def _number_text(value: float) -> str:
    """A bound as people write it: 3,600 or 2,147,483,647 or 1e12."""
    if float(value).is_integer() and abs(value) < 1e10:
        return f"{int(value):,}"
    return f"{value:.0e}".replace("e+", "e")


def _check_field(name: str, value: object) -> None:
    """Refuse a preset number that is not a finite number in its `_RANGES` range (whole for max_num_seqs)."""
    low, high, low_allowed = _RANGES[name]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise SettingsError(f"field {name!r} must be a non-negative number (got {value!r})")
    finite = isinstance(value, int) or math.isfinite(value)  # NaN and infinities are floats; ints are finite
    if not (finite and (value > low or (low_allowed and value == low)) and value <= high):
        interval = f"{'[' if low_allowed else '('}{_number_text(low)}, {_number_text(high)}]"
        raise SettingsError(f"field {name!r} must be a finite number in {interval} (got {value!r})")
    if name == "max_num_seqs" and value != int(value):
        raise SettingsError(f"field {name!r} must be a whole number (got {value!r})")


@dataclass(frozen=True)
class HardwarePreset:
    """One rollout instance (one engine, one model copy) and the trainer it feeds."""

    name: str
    description: str
    weights_bytes: float
    params: float
    kv_bytes_per_token: float
    bandwidth_bytes_per_s: float
    eta_bandwidth: float
    flops_per_s: float
    eta_flops: float
    hbm_bytes: float
    gpu_memory_utilization: float = 0.90
    activation_reserve_bytes: float = 2e9
    step_overhead_s: float = 0.0002
    max_num_seqs: int = 1024
    # Trainer: seconds per step = train_fixed_s + train_per_token_s * tokens, then a weight sync.
    train_fixed_s: float = 2.0
    train_per_token_s: float = 2.2e-5
    weight_sync_s: float = 1.1

    def __post_init__(self) -> None:
        for name in _RANGES:
            _check_field(name, getattr(self, name))
        if not isinstance(self.name, str) or not isinstance(self.description, str):
            raise SettingsError("fields 'name' and 'description' must be text")
        costs = {"weight_read_s": (self.weight_read_s, ("weights_bytes", "bandwidth_bytes_per_s", "eta_bandwidth")),
                 "compute_s_per_token": (self.compute_s_per_token, ("params", "flops_per_s", "eta_flops")),
                 "kv_s_per_token": (self.kv_s_per_token, ("kv_bytes_per_token", "bandwidth_bytes_per_s",
                                                          "eta_bandwidth"))}
        for name, (cost, fields) in costs.items():
            if not (math.isfinite(cost) and 0 <= cost <= MAX_STEP_COST_S):
                raise SettingsError(  # the fields it is made of named, so a one-field slip is found at once
                    f"the fields give a decode cost {name} of {cost:.4g} s, not a finite number of seconds up to "
                    f"{MAX_STEP_COST_S:g}; check fields {', '.join(map(repr, fields))}"
                )
        if self.kv_capacity_tokens < 1:
            raise SettingsError(
                "the weights and activation reserve leave no KV cache (weights_bytes + activation_reserve_bytes >= "
                "hbm_bytes x gpu_memory_utilization); fix those fields"
            )

    @property
    def weight_read_s(self) -> float:
        """Seconds to stream the weights once (the floor of every decode step)."""
        return self.weights_bytes / (self.eta_bandwidth * self.bandwidth_bytes_per_s)

    @property
    def compute_s_per_token(self) -> float:
        """Seconds of GEMM compute per decoded token (2·N FLOPs)."""
        return 2.0 * self.params / (self.eta_flops * self.flops_per_s)

    @property
    def kv_s_per_token(self) -> float:
        """Seconds to read one token of KV cache once."""
        return self.kv_bytes_per_token / (self.eta_bandwidth * self.bandwidth_bytes_per_s)

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache that fit beside the weights and the activation reserve."""
        free = self.hbm_bytes * self.gpu_memory_utilization - self.weights_bytes - self.activation_reserve_bytes
        return max(int(free / self.kv_bytes_per_token), 0)

    def step_seconds(self, live: np.ndarray | float, context_tokens: np.ndarray | float) -> np.ndarray:
        """Decode-step time for ``live`` sequences holding ``context_tokens`` tokens in all."""
        live = np.asarray(live, dtype=np.float64)
        gemm = np.maximum(self.weight_read_s, self.compute_s_per_token * live)
        return self.step_overhead_s + gemm + self.kv_s_per_token * np.asarray(context_tokens, dtype=np.float64)

    def prefill_seconds(self, prompt_tokens: np.ndarray | float) -> np.ndarray:
        """Compute-bound prefill time of prompts."""
        return self.compute_s_per_token * np.asarray(prompt_tokens, dtype=np.float64)

    def train_step_seconds(self, tokens: np.ndarray | float) -> np.ndarray:
        """Trainer time for one step over ``tokens`` (prompt + response, all samples), without the sync."""
        return self.train_fixed_s + self.train_per_token_s * np.asarray(tokens, dtype=np.float64)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _trainer_per_token_s(params: float, flops: float, mfu: float = 0.35, gpus: int = 8) -> float:
    # fwd+bwd (6N) plus the old-policy log-probs (2N) per token, on `gpus` trainer GPUs at `mfu`
    # (docs/cost-model.md, "The trainer": an engineering assumption).
    return 8.0 * params / (flops * mfu * gpus)


def _preset(**kwargs: object) -> HardwarePreset:
    params = float(kwargs["params"])  # type: ignore[arg-type]
    flops = float(kwargs["flops_per_s"])  # type: ignore[arg-type]
    weights = float(kwargs["weights_bytes"])  # type: ignore[arg-type]
    kwargs.setdefault("train_per_token_s", _trainer_per_token_s(params, flops))
    # Weight sync over a 25 GB/s path plus a fixed 0.5 s (docs/cost-model.md, "The trainer").
    kwargs.setdefault("weight_sync_s", weights / 25e9 + 0.5)
    return HardwarePreset(**kwargs)  # type: ignore[arg-type]


# Figures: docs/cost-model.md, "The presets" (H100/H800 3.35 TB/s and 989 dense bf16 TFLOP/s;
# A100-80 2.039 TB/s and 312; Ascend 910B ~1.6 TB/s (uncertain) and ~320; Qwen2.5-7B 15.23 GB of bf16
# weights and 57,344 B of KV per token; Llama-2-7B 13.5 GB and 524,288 B).
_H100_QWEN = _preset(
    name="h100-qwen2.5-7b",
    description="H100 SXM 80 GB, Qwen2.5-7B (GQA), bf16, vLLM defaults",
    weights_bytes=15.23e9, params=7.62e9, kv_bytes_per_token=57_344,
    bandwidth_bytes_per_s=3.35e12, eta_bandwidth=0.80, flops_per_s=989e12, eta_flops=0.60,
    hbm_bytes=80e9, step_overhead_s=0.0002, max_num_seqs=1024,
)
PRESETS: dict[str, HardwarePreset] = {
    p.name: p
    for p in (
        _H100_QWEN,
        # The H800 is the H100 die with a slower NVLink, which a single-GPU 7B instance does not use.
        dataclasses.replace(_H100_QWEN, name="h800-qwen2.5-7b",
                            description="H800 SXM 80 GB (same die as H100), Qwen2.5-7B (GQA), bf16"),
        # Measured (2026-12-04): decode steps of a Qwen2.5-7B-shaped decoder on one H200, fitted by the step model
        # (scripts/bench_gpu_step.py; docs/cost-model.md, "Checked on a real GPU"): efficiencies and the per-step
        # overhead from the fit, against the H200 SXM's data sheet (4.8 TB/s, 989 dense bf16 TFLOP/s); HBM the
        # total CUDA reports to PyTorch there (150,109,880,320 B), what vLLM's gpu_memory_utilization is a fraction of.
        _preset(
            name="h200-qwen2.5-7b",
            description="H200 SXM 141 GB, Qwen2.5-7B (GQA), bf16; step model fitted to a real H200's kernels",
            weights_bytes=15.23e9, params=7.62e9, kv_bytes_per_token=57_344,
            bandwidth_bytes_per_s=4.8e12, eta_bandwidth=0.81, flops_per_s=989e12, eta_flops=0.615,
            hbm_bytes=150.1e9, step_overhead_s=0.00207, max_num_seqs=1024,
        ),
        _preset(
            name="a100-llama2-7b",
            description="A100 SXM 80 GB, Llama-2-7B (MHA), bf16",
            weights_bytes=13.5e9, params=6.74e9, kv_bytes_per_token=524_288,
            bandwidth_bytes_per_s=2.039e12, eta_bandwidth=0.80, flops_per_s=312e12, eta_flops=0.60,
            hbm_bytes=80e9, step_overhead_s=0.0002, max_num_seqs=256,
        ),
        _preset(
            name="ascend910b-qwen2.5-7b",
            description="Ascend 910B 64 GB, Qwen2.5-7B (GQA); bandwidth uncertain, calibrate",
            weights_bytes=15.23e9, params=7.62e9, kv_bytes_per_token=57_344,
            bandwidth_bytes_per_s=1.6e12, eta_bandwidth=0.60, flops_per_s=320e12, eta_flops=0.50,
            hbm_bytes=64e9, step_overhead_s=0.0005, max_num_seqs=256,
        ),
    )
}
DEFAULT_PRESET = "h100-qwen2.5-7b"


def load_preset(name_or_path: str | Path = DEFAULT_PRESET, **overrides: float) -> HardwarePreset:
    """A preset by name, or a JSON calibration file: ``{"base": "<preset>", "<field>": value, ...}``.

    Raises
    ------
    SettingsError
        For an unknown preset, an unreadable file or an unknown field.
    """
    text = str(name_or_path)
    if text in PRESETS:
        preset = PRESETS[text]
    else:
        path = Path(text)
        if stdin_said(text):  # `--preset -` was an unknown preset '-' (E129)
            raise SettingsError(f"--preset {stdin_said(text)}")
        if not os.path.isfile(path):  # False, not ENAMETOOLONG (exit 3), for a name too long for any file
            if path.suffix.lower() == ".json" or len(path.parts) > 1:  # meant as a file
                raise SettingsError(f"--preset {text}: no such file" + (missing_hint(path) or (
                    f"; name a calibration file that exists (asp calibrate -o writes one) or a preset: "
                    f"{', '.join(PRESETS)}")))
            raise SettingsError(
                f"unknown hardware preset {text!r}; use one of {', '.join(PRESETS)} or a JSON calibration file"
            )
        try:
            raw = path.read_bytes()
            raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{path}: unreadable calibration file ({exc}); give a JSON object") from None
        document = limits.loads(raw, str(path), SettingsError,
                                invalid=f"{path}: unreadable calibration file (not valid JSON); give a JSON object")
        if not isinstance(document, dict):
            raise SettingsError(f"{path}: a calibration file is a JSON object of preset fields")
        document.setdefault("name", f"{document.get('base', DEFAULT_PRESET)}+{path.name}")
        preset = preset_from_document(document, str(path))
    return _override(preset, overrides, "overrides") if overrides else preset


def preset_from_document(document: dict, where: str) -> HardwarePreset:
    """The preset a calibration file's JSON object describes (``base`` and the fields it overrides), each field
    validated; ``where`` names the document in errors (SettingsError)."""
    fields = dict(document)
    base = fields.pop("base", DEFAULT_PRESET)
    if not isinstance(base, str) or base not in PRESETS:
        raise SettingsError(f"{where}: unknown base preset {base!r}; use one of {', '.join(PRESETS)}")
    return _override(PRESETS[base], fields, where)


def recorded_preset(name: str, fields: object) -> HardwarePreset:
    """The preset a schedule was made with: every field it recorded (its metadata's ``preset``), so that a
    schedule made with ``--preset calibration.json`` replays the same wherever that file is; fields the record
    lacks come from the preset ``name`` (or the default where that file is gone). A file without the record,
    or with one this version cannot read (fields renamed since), gets the preset ``name`` again; one with
    neither a readable record nor a loadable name, the error of loading ``name``."""
    try:
        named = load_preset(name)
    except SettingsError:
        if not isinstance(fields, dict):
            raise
        named = None  # a calibration file moved away: the record alone
    if isinstance(fields, dict):
        try:  # on the named preset where it loads, so that a field an edited or older record lacks is its own
            return _override(named or PRESETS[DEFAULT_PRESET], fields, "the schedule's preset")
        except SettingsError:
            if named is None:
                raise
    assert named is not None
    return named


def check_recorded_preset(fields: object, where: str) -> None:
    """A schedule's recorded preset (its metadata's ``preset``) whose every field is one this version knows must
    be a valid preset: a broken value (NaN, out of range) is damage, which `recorded_preset` must not paper over
    with the named preset. (A record with fields this version does not know is an older one: it falls back.)"""
    from asp_cli.errors import ScheduleFormatError

    if not isinstance(fields, dict) or not set(fields) <= {f.name for f in dataclasses.fields(HardwarePreset)}:
        return
    try:
        _override(PRESETS[DEFAULT_PRESET], fields, "its recorded preset")
    except SettingsError as exc:
        raise ScheduleFormatError(f"{where}: damaged asp schedule ({str(exc).replace('; fix the calibration file', '')}"
                                  "); write the schedule again") from None


def _override(preset: HardwarePreset, values: dict, where: str) -> HardwarePreset:
    """``preset`` with ``values`` replaced, each checked; errors name ``where`` (the file) and the field."""
    fields = {f.name: f for f in dataclasses.fields(HardwarePreset)}
    clean: dict = {}
    for key, value in values.items():
        if key not in fields:
            raise SettingsError(f"{where}: unknown preset field {key!r}; fields are {', '.join(fields)}")
        if key in ("name", "description"):
            if not isinstance(value, str):
                raise SettingsError(f"{where}: field {key!r} must be text (got {type(value).__name__})")
            clean[key] = value
            continue
        try:
            _check_field(key, value)
        except SettingsError as exc:
            raise SettingsError(f"{where}: {exc}; fix the calibration file") from None
        clean[key] = int(value) if key == "max_num_seqs" else float(value)
    try:
        return dataclasses.replace(preset, **clean)
    except SettingsError as exc:
        raise SettingsError(f"{where}: {exc}") from None


# --------------------------------------------------------------------------------------------------------
# One inference minibatch (one blocking generate() call), continuous batching inside


def wave_decode_seconds(
    preset: HardwarePreset, response_tokens: np.ndarray, prompt_tokens: np.ndarray
) -> tuple[float, np.ndarray]:
    """Time of one wave of sequences that all start together and each stop at its own length.

    Exact for the step model above when every sequence is admitted at step 0 (the batch fits in
    ``max_num_seqs`` and the KV cache): step s has b(s) = #{L_i >= s} live sequences. Returns the
    wave's total seconds (prefill included) and each sequence's finish offset in seconds.
    """
    lengths = np.asarray(response_tokens, dtype=np.float64)
    prompts = np.asarray(prompt_tokens, dtype=np.float64)
    if lengths.size == 0:
        return 0.0, lengths
    prefill = float(preset.prefill_seconds(prompts.sum()))
    order = np.argsort(-lengths, kind="stable")
    sorted_len = lengths[order]
    # Between consecutive distinct lengths, the live count is constant: k sequences for
    # (L_(k) - L_(k+1)) steps, sorted descending. Summed context grows linearly inside each stretch.
    count = np.arange(1, lengths.size + 1, dtype=np.float64)
    next_len = np.append(sorted_len[1:], 0.0)
    stretch = sorted_len - next_len  # steps with exactly k live sequences
    gemm = np.maximum(preset.weight_read_s, preset.compute_s_per_token * count)
    fixed_per_step = preset.step_overhead_s + gemm
    # Stretches happen in time order k = n-1 (all live) .. 0 (only the longest left); sequence k stops at the
    # end of stretch k, so its fixed-part finish is the sum over stretches j >= k.
    fixed_stretch = stretch * fixed_per_step
    fixed_until = np.cumsum(fixed_stretch[::-1])[::-1]
    # KV part: each sequence i reads its context at every step it is live: P_i*L_i + L_i(L_i+1)/2 over its
    # life; at step s the others live at s add their own. Finish offset of sequence with length x:
    # sum_j kv * (P_j*min(L_j,x) + min(L_j,x)(min(L_j,x)+1)/2).
    total_kv = preset.kv_s_per_token * float(np.sum(prompts * lengths + lengths * (lengths + 1) / 2))
    finish_sorted = prefill + fixed_until + _kv_until(preset, sorted_len, prompts[order])
    total = prefill + float(fixed_until[0]) + total_kv
    finish = np.empty_like(finish_sorted)
    finish[order] = finish_sorted
    return total, finish


def _kv_until(preset: HardwarePreset, sorted_len: np.ndarray, sorted_prompts: np.ndarray) -> np.ndarray:
    """KV-read seconds elapsed when each sequence (sorted by length, descending) emits its last token."""
    # For x = L_(k): sequences j < k (longer) contribute P_j*x + x(x+1)/2; sequences j >= k contribute their
    # whole life P_j*L_j + L_j(L_j+1)/2. Prefix sums over the descending order make this O(n).
    n = sorted_len.size
    life = sorted_prompts * sorted_len + sorted_len * (sorted_len + 1) / 2
    suffix_life = np.cumsum(life[::-1])[::-1]  # sum over j >= k
    prefix_prompts = np.concatenate(([0.0], np.cumsum(sorted_prompts)))[:n]  # sum over j < k
    idx = np.arange(n, dtype=np.float64)
    x = sorted_len
    longer = prefix_prompts * x + idx * x * (x + 1) / 2
    return preset.kv_s_per_token * (longer + suffix_life)
