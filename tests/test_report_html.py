import re
import shutil
import struct
import subprocess
import tempfile
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import polars as pl
import pytest

from asp_cli.report.checks import CheckLimits, check_report, compare_reports
from asp_cli.report.facts import build_report, observed_from_samples
from asp_cli.report.html import render_html
from asp_cli.report.simulated import simulated_section
from asp_cli.reading import read_lengths
from asp_cli.schedule_format import read_schedule

from test_report import make_schedule


@pytest.fixture(scope="module")
def page_parts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("html")
    made = make_schedule(folder / "s.parquet", max_lag=3)
    first = made.frame.filter(pl.col("epoch") == 0)
    samples = first.select("prompt_id", (pl.col("predicted_tokens") // 2 + 7).alias("response_tokens"))
    report = build_report(read_schedule(folder / "s.parquet"), observed=observed_from_samples(samples, ["l.csv"]))
    samples.write_csv(folder / "l.csv")
    report["simulated"] = simulated_section(read_schedule(folder / "s.parquet"), read_lengths([folder / "l.csv"])[0])
    checks = check_report(report, CheckLimits(max_padding=0.0, max_lag=3))
    return report, checks, compare_reports(report, report)


@pytest.fixture(scope="module")
def page(page_parts):
    report, checks, comparison = page_parts
    return render_html(report, checks=checks, comparison=comparison)


def test_page_is_self_contained(page):
    assert page.startswith("<!DOCTYPE html>")
    for needle in ("<script", "<link", "<img", "src=", "url(", "@import"):
        assert needle not in page, needle
    # The only URL is the SVG namespace, which browsers never fetch.
    assert set(re.findall(r"https?://[^\"' <]+", page)) == {"http://www.w3.org/2000/svg"}


def test_page_has_every_plot_and_section(page):
    for anchor in ("made", "checks", "compare", "lengths", "timeline", "queue", "batch", "lag", "steps",
                   "observed", "simulated"):
        assert f'id="{anchor}"' in page, anchor
    titles = re.findall(r"<svg[^>]*><title>([^<]+)</title>", page)
    for title in ("Distribution of predicted lengths", "Per-instance timeline of minibatches",
                  "Arrival versus consumption at the training queue", "Training queue depth",
                  "Effective batch over time", "Distribution of expected lag", "Mean expected lag per training step",
                  "Representativeness of each training step", "Predicted versus observed lengths",
                  "Per-instance timeline of minibatches (simulated)"):
        assert title in titles, title
    assert "observed group maximum" in page  # observed lengths drawn next to the prediction
    assert "arrivals in the simulated replay" in page and "simulated replay: sequences decoding" in page
    assert "Replayed with observed lengths for" in page
    assert "Checks FAILED" in page


def test_every_svg_is_well_formed_xml(page):
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert len(svgs) >= 9
    for svg in svgs:
        ET.fromstring(svg)


def test_page_is_deterministic_and_has_no_clock_time(page_parts, page):
    report, checks, comparison = page_parts
    assert render_html(report, checks=checks, comparison=comparison) == page
    assert not re.search(r"20\d\d-\d\d-\d\d", page)


def test_page_escapes_text_from_the_file(page_parts):
    report, _, _ = page_parts
    hostile = {**report, "schedule": {**report["schedule"], "name": "<script>alert(1)</script>.parquet"}}
    page = render_html(hostile)
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_page_without_timing_or_observed_lengths(page_parts):
    report, _, _ = page_parts
    bare = {**report, "queue": None, "effective_batch": None, "lag": None, "observed": None,
            "schedule": {**report["schedule"], "timing_columns": False}}
    page = render_html(bare)
    assert "no <code>expected_*</code> timing" in page
    assert 'id="queue"' not in page and 'id="observed"' not in page


# --------------------------------------------------------------------------------------------------------
# In a real browser


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _render_in_chromium(page: Path, screenshot: Path) -> tuple[str, str]:
    """Screenshot a page and dump its DOM in headless Chromium; returns (dom, browser log)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", "--enable-logging=stderr", "--v=0", "--window-size=900,1400"]
    with tempfile.TemporaryDirectory() as profile:
        shot = subprocess.run([_chromium(), *flags, f"--user-data-dir={profile}", f"--screenshot={screenshot}",
                               page.as_uri()], capture_output=True, text=True, timeout=90)
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([_chromium(), *flags, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=90)
    return dom.stdout, shot.stderr + dom.stderr


def _console_messages(log: str) -> list[str]:
    # With --enable-logging=stderr Chromium logs every console message and uncaught error as ":CONSOLE".
    return [line for line in log.splitlines() if ":CONSOLE" in line]


def _png_ink(path: Path) -> tuple[int, int, float]:
    """Width, height and the share of non-zero bytes in the filtered pixel stream.

    Each row is filtered against its left and upper neighbours, so a blank (one-colour) page filters to
    almost all zeros while text, lines and bars leave non-zero bytes.
    """
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    offset, idat, width, height = 8, b"", 0, 0
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    raw = zlib.decompress(idat)
    return width, height, sum(1 for b in raw if b) / len(raw)


@pytest.mark.browser
def test_page_renders_in_headless_chromium(page, tmp_path):
    if _chromium() is None:
        pytest.skip("headless Chromium not installed (apt-get install chromium); browser test skipped")
    html = tmp_path / "report.html"
    html.write_text(page, encoding="utf-8")
    png = tmp_path / "report.png"
    dom, log = _render_in_chromium(html, png)
    assert png.is_file(), log[-2000:]
    width, height, ink = _png_ink(png)
    assert (width, height) == (900, 1400)
    assert ink > 0.01, f"the screenshot looks blank ({ink:.2%} ink)"
    assert _console_messages(log) == []
    assert dom.count("<svg") >= 10 and "Per-instance timeline of minibatches (simulated)" in dom


@pytest.mark.browser
def test_the_browser_check_would_catch_errors_and_blank_pages(tmp_path):
    if _chromium() is None:
        pytest.skip("headless Chromium not installed (apt-get install chromium); browser test skipped")
    html = tmp_path / "bad.html"
    html.write_text("<html><body><script>console.error('boom'); missing();</script></body></html>")
    png = tmp_path / "bad.png"
    _, log = _render_in_chromium(html, png)
    messages = _console_messages(log)
    assert any("boom" in m for m in messages) and any("missing is not defined" in m for m in messages)
    assert _png_ink(png)[2] < 0.01
