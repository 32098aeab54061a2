import json

import numpy as np
import pytest

from asp_cli.costmodel import PRESETS, load_preset, wave_decode_seconds
from asp_cli.errors import SettingsError


def token_by_token(preset, lengths, prompts):
    """Step the decode loop one token at a time: the reference the closed form must match."""
    t = float(preset.prefill_seconds(prompts.sum()))
    finish = np.zeros(lengths.size)
    for s in range(1, int(lengths.max()) + 1):
        live = lengths >= s
        t += float(preset.step_seconds(live.sum(), np.sum((prompts + s)[live])))
        finish[lengths == s] = t
    return t, finish


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_closed_form_matches_token_stepping(name):
    preset = PRESETS[name]
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 300, 40)
    prompts = rng.integers(1, 200, 40)
    total, finish = wave_decode_seconds(preset, lengths, prompts)
    ref_total, ref_finish = token_by_token(preset, lengths, prompts)
    assert total == pytest.approx(ref_total, rel=1e-12)
    assert np.allclose(finish, ref_finish, rtol=1e-12)


def test_h100_preset_matches_the_published_roofline_table():
    # rollout-cost-model.md section 1.4: H100 + Qwen2.5-7B at 1k context: ~5.9 ms at B=1, ~12.4 ms at B=256.
    preset = PRESETS["h100-qwen2.5-7b"]
    assert float(preset.step_seconds(1, 1024)) * 1e3 == pytest.approx(5.9, abs=0.1)
    assert float(preset.step_seconds(256, 256 * 1024)) * 1e3 == pytest.approx(12.4, abs=0.2)
    assert 900_000 < preset.kv_capacity_tokens < 1_000_000


def test_calibration_file_overrides_fields(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"base": "a100-llama2-7b", "eta_bandwidth": 0.7, "max_num_seqs": 128}))
    preset = load_preset(path)
    assert preset.eta_bandwidth == 0.7 and preset.max_num_seqs == 128
    assert preset.kv_bytes_per_token == PRESETS["a100-llama2-7b"].kv_bytes_per_token


@pytest.mark.parametrize(
    "content, fragment",
    [("{", "unreadable"), ('{"bogus": 1}', "unknown preset field"), ('{"base": "nope"}', "unknown base"),
     ('{"eta_bandwidth": -1}', "non-negative")],
)
def test_bad_calibration_files_are_refused(tmp_path, content, fragment):
    path = tmp_path / "cal.json"
    path.write_text(content)
    with pytest.raises(SettingsError, match=fragment):
        load_preset(path)


def test_unknown_preset_name():
    with pytest.raises(SettingsError, match="unknown hardware preset"):
        load_preset("tpu-v9")


def test_a_missing_calibration_file_is_named_as_a_missing_file(tmp_path):
    with pytest.raises(SettingsError, match=r"--preset .*preset\.json: no such file; name a calibration file"):
        load_preset(tmp_path / "preset.json")
    # A name too long for the file system raised ENAMETOOLONG: exit 3, where a missing calibration file is exit 4.
    with pytest.raises(SettingsError, match=r"--preset .*m\.json: no such file; name a calibration file"):
        load_preset(tmp_path / ("m" * 300 + ".json"))
    with pytest.raises(SettingsError, match="unknown hardware preset"):
        load_preset("m" * 300)


def test_the_command_lines_preset_names_are_the_presets():
    """`asp_cli.settings.PRESET_NAMES` (listed in the command line's help without importing the cost model) holds
    every preset, in `PRESETS`' order."""
    from asp_cli.settings import PRESET_NAMES

    assert PRESET_NAMES == tuple(PRESETS)
