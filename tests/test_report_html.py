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
from asp_cli.report.facts import build_report
from asp_cli.report.observed import observed_from_samples
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


# --------------------------------------------------------------------------------------------------------
# What a reader of the page relies on (issue 13: the newcomer round)


def _svg_named(page: str, title: str) -> str:
    return next(svg for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S) if f"<title>{title}</title>" in svg)


def test_the_nav_bar_links_every_section_on_the_page_in_order(page):
    sections = re.findall(r'<section id="([^"]+)">', page)
    nav = re.search(r"<nav>(.*?)</nav>", page, flags=re.S).group(1)
    assert re.findall(r'href="#([^"]+)"', nav) == sections
    assert {"observed", "simulated", "batch", "compare", "checks"} <= set(sections)
    assert ">effective batch</a>" in nav and ">comparison</a>" in nav


def test_plots_over_time_share_one_time_axis(page_parts):
    # The queue-depth plot stopped at 632 s under an arrival plot that ran to 830 s (a replay that ran longer).
    import copy

    report = copy.deepcopy(page_parts[0])
    for part in ("queue", "effective_batch"):
        report["simulated"][part]["grid_s"] = [t * 1.6 for t in report["simulated"][part]["grid_s"]]
    page = render_html(report)

    def ticks(svg: str) -> list[str]:
        return re.findall(r'<text class="tick" x="[\d.]+" y="[\d.]+" text-anchor="middle">([^<]+)</text>', svg)

    queue = ticks(_svg_named(page, "Arrival versus consumption at the training queue"))
    assert len(queue) >= 3 and queue == ticks(_svg_named(page, "Training queue depth")) == ticks(_svg_named(page, "Effective batch over time"))


def test_every_y_label_fits_beside_its_plot(page):
    from asp_cli.report.html import _CHAR_EM, _LABEL_PX

    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        height = float(re.search(r'viewBox="0 0 \d+ (\d+)"', svg).group(1))
        for style, middle, text in re.findall(r'<text class="label"( style="font-size:\d+px")? '
                                              r'transform="translate\(14,([\d.]+)\) rotate\(-90\)"[^>]*>([^<]+)<', svg):
            size = int(re.search(r"\d+", style).group()) if style else _LABEL_PX
            room = 2 * min(float(middle), height - float(middle))
            assert len(html_unescape(text)) * _CHAR_EM * size <= room, (text, size, room)


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)


def _comparison_cells(page: str) -> dict[str, list[str]]:
    section = re.search(r'<section id="compare">.*?</section>', page, flags=re.S).group(0)
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", section, flags=re.S):
        cells = [html_unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)]
        if cells:
            rows[cells[0]] = cells[1:]
    return rows


def test_the_comparison_reads_as_the_terminal_does(page_parts):
    from asp_cli.report.text import render_compare_text

    report, _, _ = page_parts
    import copy

    a, b = copy.deepcopy(report), copy.deepcopy(report)
    a["size"]["prompts"] = b["size"]["prompts"] = 3540
    b["padding"]["fraction"] = a["padding"]["fraction"] - 0.00004  # shown as -0.0%: no difference
    b["instances"]["makespan_s"] = a["instances"]["makespan_s"] / 3  # rollout ends sooner, training does not
    comparison = compare_reports(a, b)
    cells = _comparison_cells(render_html(a, comparison=comparison))
    assert cells["prompts"] == ["3,540", "3,540", "0", ""]
    padding = cells["predicted padding"]
    assert re.fullmatch(r"\d+\.\d%", padding[0]) and padding[2:] == ["0.0%", "same"]
    makespan = cells["last rollout ends (s)"]
    assert makespan[3] == "-" and re.fullmatch(r"-[\d,]+\.\d", makespan[2])
    page = render_html(a, comparison=comparison)
    assert "last rollout ends (s): no verdict; the last steps end at the same time" in html_unescape(page)
    text = render_compare_text(comparison)
    assert "3,540" in text and "last rollout ends (s): no verdict" in text
    assert "-0.0%" not in text and "-0.0%" not in page
    # When training does end sooner, the faster rollout is better again.
    b["queue"]["trainer_end_s"] = a["queue"]["trainer_end_s"] - 50
    row = next(r for r in compare_reports(a, b)["facts"] if r["fact"] == "instances.makespan_s")
    assert row["better"] == "b" and row["note"] is None


def test_a_schedule_of_an_input_whose_name_is_not_utf8_renders(tmp_path, monkeypatch):
    """A schedule made from a prompt file whose name is bytes that are not UTF-8 (Linux allows any) records that
    name in its command line; `asp report --html` died of it, exit 70 'a bug in asp' (UnicodeEncodeError as the page
    was written; an ops round), where the text report and --json show it escaped. The page shows it escaped too."""
    import os

    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    from util import make_prompts, write_jsonl

    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / os.fsdecode(b"p\xff.jsonl"), make_prompts(30))
    made = runner.invoke(app, ["schedule", os.fsdecode(b"p\xff.jsonl"), "-o", "s.parquet", "--quiet"])
    assert made.exit_code == 0, made.stderr
    result = runner.invoke(app, ["report", "s.parquet", "--html", "r.html"])
    assert result.exit_code == 0, result.stderr
    assert "p\\udcff.jsonl" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_the_two_trainer_idle_figures_say_which_is_which(page_parts, page):
    """The card and the replay table both read "trainer idle" with different figures (the waits between steps over
    the steps' span, and the share of the whole run): each now says which."""
    report, _, _ = page_parts
    between = report["queue"]["trainer_idle_fraction"]
    assert f"<b>{between:.1%}</b><span>trainer idle between steps (of the steps&#x27; span)</span>" in page
    assert "share of the whole run (the wait before the first step included)" in page
    assert ">trainer idle<" not in page
