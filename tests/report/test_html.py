"""The HTML report (`--swarm-html`): a whole run's page opened in headless Chromium, and the charts' content.

The browser test runs a sweep twice through pytest on the fake box (record a baseline, then gate against it writing
the report), so the page carries the plugin's own figures, baselines, bands, history and memory; Chromium must load it
with an empty console and the charts in its DOM.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures.summary import summarize
from pytest_swarm.gate.verdict import baseline_entry, evaluate
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.report.html import page
from pytest_swarm.report.text import markdown
from pytest_swarm.results.item import ItemResult
from pytest_swarm.results.run import RunReport
from pytest_swarm.settings import GateSettings
from pytest_swarm.specs import MarkerConfig
from pytest_swarm.telemetry.memory import MemorySample, summarize_memory
from pytest_swarm.testing import FakeBox
from tests import chromium
from tests.factories import ab_item, clocked_ab_item, item_result, sweeps_over

HW = "--swarm-hardware=testbox"
SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=[1, 2], max_tokens=8, rounds=1, prompts_per_agent=3,
                   slo={"ttft.p95": "< 30"}, gate=["effective_tps", "per_request_tps.median", "ttft.p95"], canary=False)
def test_sweep(swarm):
    assert swarm.run().failures == 0
"""


def charts_in(document: str) -> dict[str, str]:
    """Each `<figure class="chart">` of the page by its kind, with its markup (the SVG inside)."""
    found = {}
    for chunk in document.split('<figure class="chart" data-chart="')[1:]:
        kind, _, rest = chunk.partition('"')
        found[kind] = rest.split("</figure>", 1)[0]
    return found


def test_the_report_of_a_whole_run_loads_clean_in_chromium_with_its_charts(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    chromium.executable()  # no browser: fail now, not after the measuring
    pytester.makepyfile(test_sweep=SUITE)
    box = FakeBox(rss_mib=600.0)
    pytester.runpytest("-q", HW, "--swarm-update-baselines", plugins=[box]).assert_outcomes(passed=2)
    result = pytester.runpytest("-q", HW, "--swarm-html=report.html", plugins=[box])
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["swarm HTML report written to report.html"])
    report = pytester.path / "report.html"

    loaded = chromium.load(report, tmp_path)
    assert loaded.console == [], f"console messages while loading the report: {loaded.console}"
    dom = loaded.dom
    assert "pytest-swarm report" in dom and "testbox" in dom and "fake box (llamacpp)" in dom, (
        "header: profile and engine version"
    )
    charts = charts_in(dom)
    trends = [
        "trend-effective_tps",
        "trend-per_request_tps.median",
        "trend-ttft.p95",
    ]  # the default history: both runs, each gated figure
    assert list(charts) == ["throughput", "ttft", "scatter", "where", "memory", *trends]
    assert "C=1 recorded" in charts["where"] and "C=2 this run" in charts["where"], "each level split, both sides"
    assert all("<svg" in markup for markup in charts.values())
    assert (
        '-trend-effective_tps-C1"' in charts["trend-effective_tps"]
        and '-trend-ttft.p95-C2"' in charts["trend-ttft.p95"]
    )
    for gid in (
        "measured-effective_tps",
        "measured-per_request_tps.median",
        "measured-per_request_tps.min",
        "baseline-effective_tps",
        "tolerance-effective_tps",
        "baseline-per_request_tps.median",
    ):
        assert f'-{gid}"' in charts["throughput"], gid
    for gid in ("measured-ttft.p50", "measured-ttft.p95", "measured-ttft.p99", "baseline-ttft.p95", "limit-ttft.p95"):
        assert f'-{gid}"' in charts["ttft"], gid
    assert '-requests-C1"' in charts["scatter"] and '-requests-C2"' in charts["scatter"]
    assert '-rss-C1"' in charts["memory"] and '-rss-C2"' in charts["memory"]
    assert len(re.findall(r'class="badge v-(?:pass|warn)"', dom)) >= 2, "each item's verdict, coloured"

    shot = chromium.screenshot(report, tmp_path, tmp_path / "report.png")
    assert shot.stat().st_size > 30_000, "a rendered page, not a blank one"


def test_the_console_check_sees_script_errors_and_refused_fetches(tmp_path: Path) -> None:
    """The empty console above means something: the same check catches an error and a fetch the policy refuses."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'\">"
        "</head><body><img src=\"http://127.0.0.1:9/chart.png\"><script>console.error('marker-7731')</script></body></html>"
    )
    console = chromium.load(bad, tmp_path).console
    assert any("marker-7731" in message for message in console), console
    assert any("Content Security Policy" in message and "127.0.0.1:9" in message for message in console), console


def test_swarm_html_without_matplotlib_says_what_to_install(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['matplotlib'] = None  # as if not installed\n")
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("--swarm-html=report.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "ERROR: --swarm-html needs matplotlib, which is not installed: pip install 'pytest-llm-swarm[html]'"
        in result.stderr.str()
    )


# --- a process sweep built by hand: failures, GPU memory, a regression ------------------------------------------


def _request(
    agent: int, speed: float, ttft: float, worker: int, tokens: int = 11, error: str | None = None
) -> RequestRecord:
    start = float(agent)
    times = [start + ttft + i / speed for i in range(tokens)]
    return RequestRecord(
        agent=agent, start=start, end=times[-1], token_times=times, output_tokens=tokens, worker=worker, error=error
    )


def _item(config: MarkerConfig, workers: int, speed: float, outcome_against: float | None = None) -> ItemResult:
    """`workers` servers decoding at `speed / workers` each, 4 boots of 2 rounds; one timed-out and one refused request at N=4."""
    rounds = []
    for boot in range(4):
        for r in range(2):
            s = speed / workers * (1 + 0.01 * boot) * (1 + 0.002 * r)
            requests = [
                _request(a, s * (1 + 0.02 * a), 0.05 * workers * (1 + 0.1 * a), a % workers) for a in range(2 * workers)
            ]
            if workers == 4 and boot == r == 0:
                requests += [
                    _request(9, s, 3.0, 1, tokens=3, error="timeout"),
                    RequestRecord(agent=10, start=0.0, end=1.0, error="HTTP 500"),
                ]
            rounds.append(RoundRecord(concurrency=2 * workers, wall_s=10.0 / s, requests=requests, boot=boot))
    result = summarize(rounds, config.workload.max_tokens, workers)
    samples = [
        MemorySample(t * 0.1, 300.0 * workers + t, 120.0 * workers + 100, 1000.0 * workers, 10_000.0) for t in range(40)
    ]
    result = replace(result, facets=replace(result.facets, memory=summarize_memory(samples, None, None)))
    entry = None
    if outcome_against is not None:
        faster = summarize(
            [replace(r, wall_s=r.wall_s / outcome_against) for r in rounds], config.workload.max_tokens, workers
        )
        entry = baseline_entry(faster, config.criteria, config.server.describe(), {})
    outcome = evaluate(result, config.criteria, entry, GateSettings())
    nodeid = f"test_workers.py::test_workers[w{workers}]"
    return item_result(
        nodeid,
        "test_workers.py::test_workers",
        config,
        result,
        outcome,
        {"engine_version": "llama-server b4242"},
        workers,
    )


def test_a_process_sweep_shows_failures_gpu_memory_limits_and_a_failing_gate() -> None:
    # allow_failures: the N=4 item's two failed requests are shown, and its gate fails on its regression alone.
    config = parse_marker(
        (),
        {
            "mode": "process",
            "workers": [1, 2, 4],
            "max_tokens": 11,
            "slo": {"ttft.p95": "< 0.3"},
            "gate": ["effective_tps"],
            "allow_failures": 2,
        },
    )
    items = [_item(config, 1, 60.0, 1.0), _item(config, 2, 60.0, 1.0), _item(config, 4, 60.0, 3.0)]
    fingerprint = {
        "cpu": "Test CPU",
        "cores": 8,
        "gpus": ["NVIDIA H100"],
        "driver": "550.1",
        "cuda": "12.4",
        "nvml": "ok",
    }
    document = page(RunReport("h100", fingerprint, items, sweeps_over(items), complete=False))

    assert "default-src 'none'" in document and "The run was interrupted" in document
    assert not re.findall(r'(?:src|href)="(?!#|data:)', document), "nothing to fetch: every reference is in the page"
    ids = re.findall(r' id="([^"]+)"', document)
    assert len(ids) == len(set(ids)), "the charts' ids do not collide"
    for svg in re.findall(r"<svg.*?</svg>", document, re.S):
        ET.fromstring(svg)  # well-formed XML, as inline SVG must be

    charts = charts_in(document)
    assert list(charts) == ["throughput", "ttft", "scatter", "memory"]
    assert '-tolerance-effective_tps"' in charts["throughput"] and '-baseline-effective_tps"' in charts["throughput"]
    assert '-limit-ttft.p95"' in charts["ttft"], "SLO and interactive lines"
    assert '-requests-failed"' in charts["scatter"] and '-interactive-per_request_tps.median"' in charts["scatter"]
    assert '-interactive-ttft.p95"' in charts["ttft"]
    assert '-gpu-N4"' in charts["memory"] and '-pss-N2"' in charts["memory"]
    assert "NVIDIA H100" in document and "llama-server b4242" in document
    assert 'class="badge v-fail"' in document and "hard limit broken" in document
    assert "requests failed (timeout x1; HTTP 500 x1)" in document
    assert "SLO: ttft.p95 &lt; 0.3, failures &lt;= 2" in document, "the failure allowance is shown with the hard limits"
    assert "none allowed" not in document, "within the allowance the failures break no limit"
    assert "largest swarm that stayed interactive" in document

    summary = markdown(RunReport("h100", {}, items, []))
    rows = [line.split(" | ") for line in summary.splitlines()[4:]]
    assert [row[-2] for row in rows] == ["pass", "pass", "fail"], "the Markdown summary carries each verdict"
    assert "effective_tps x0.3" in summary, "and the ratio to the baseline"


def test_long_runs_stay_light_without_losing_peaks() -> None:
    """An hour of 100 ms memory samples keeps its spike; thousands of requests become one embedded image, not SVG markers."""
    from pytest_swarm.report.timecharts import MAX_LINE_POINTS, _thin

    samples = [
        MemorySample(t * 0.1, 500.0 + (4000.0 if t == 12_345 else 0.0), 200.0, None, 9_000.0) for t in range(36_000)
    ]
    thinned = _thin(samples)
    assert len(thinned) <= MAX_LINE_POINTS and max(s.rss_mib for s in thinned) == 4500.0

    config = parse_marker((), {"concurrency": 64, "max_tokens": 11})
    rounds = [
        RoundRecord(
            concurrency=64, wall_s=10.0, requests=[_request(a, 20.0 + a % 7, 0.1 + a / 3000, 0) for a in range(3000)]
        )
    ]
    plain = summarize(rounds, 11)
    result = replace(plain, facets=replace(plain.facets, memory=summarize_memory(samples, None, None)))
    item = item_result("t.py::t", "t.py::t", config, result)
    document = page(
        RunReport("cpu", {"cpu": "x", "cores": 2, "gpus": [], "nvml": "not available"}, [item], sweeps_over([item]))
    )
    scatter = charts_in(document)["scatter"]
    assert "data:image/png;base64," in scatter and len(scatter) < 400_000
    assert len(charts_in(document)["memory"]) < 400_000
    assert 'class="badge v-none">not gated<' in document


def test_an_ab_item_shows_both_sides_the_ratio_its_bound_and_the_claim() -> None:
    item = ab_item()
    document = page(RunReport("hw", {}, [item], sweeps_over([item])))
    assert '<tr class="reference"><td>vs reference</td><td>llamacpp:gemma3-270m x1</td>' in document
    assert "Against the baseline or reference" in document
    assert "xllamacpp 0.0" in document, "the reference's engine version is in the header"
    assert "<td>reference " in document and "expected &gt;= 1.3" in document and "x2.00 [" in document


def test_the_history_adds_a_trend_chart_per_gated_figure_with_its_change_points_and_markdown_lists_them() -> None:
    from pytest_swarm.gate.trends import Trend, TrendPoint
    from pytest_swarm.report.timecharts import trend

    config = parse_marker((), {"concurrency": [1, 2], "max_tokens": 11, "gate": ["effective_tps", "ttft.p95"]})
    items = [
        item_result(
            f"t.py::t[c{c}]",
            "t.py::t",
            config,
            summarize([RoundRecord(concurrency=c, wall_s=1.0, requests=[_request(0, 20.0, 0.1, 0)])], 11),
        )
        for c in (1, 2)
    ]

    def points(values: list[float]) -> list[TrendPoint]:
        return [
            TrendPoint(f"r{k:02d}", f"2026-01-01T10:{k:02d}:00.000000Z", f"c{k:02d}abcdef01", "b4242", v)
            for k, v in enumerate(values)
        ]

    stepped = [100.0] * 6 + [90.0] * 6
    trends = [
        Trend.of(items[0].nodeid, "cpu", "effective_tps", points(stepped)),
        Trend.of(items[1].nodeid, "cpu", "effective_tps", points([100.0] * 12)),
        Trend.of(items[0].nodeid, "cpu", "ttft.p95", points([0.5] * 12)),
    ]
    document = page(
        RunReport(
            "cpu",
            {"cpu": "x", "cores": 2, "gpus": [], "nvml": "not available"},
            items,
            sweeps_over(items),
            trends=trends,
        )
    )
    charts = charts_in(document)
    assert "trend-effective_tps" in charts and "trend-ttft.p95" in charts
    assert (
        '-trend-effective_tps-C1"' in charts["trend-effective_tps"]
        and '-trend-effective_tps-C2"' in charts["trend-effective_tps"]
    )
    assert '-change-effective_tps-C1-6"' in charts["trend-effective_tps"], (
        "the step is marked where the new level starts"
    )
    assert "-change-" not in charts["trend-ttft.p95"]
    assert "effective_tps over the stored runs: 1 change point" in document
    for svg in re.findall(r"<svg.*?</svg>", document, re.S):
        ET.fromstring(svg)
    assert trend(items, trends, "e2e.p50", "x-") is None, "no history, no chart"

    summary = markdown(RunReport("cpu", {}, items, [], trends=trends))
    assert "#### Change points in the results history (1)" in summary
    assert (
        "- `t.py::t[c1]` effective_tps x0.900 (worse): 100 -> 90 from the run of 2026-01-01T10:06, commit c06abcdef0"
        in summary
    )
    assert "Change points" not in markdown(RunReport("cpu", {}, items, []))


def test_an_ab_item_with_a_server_clock_draws_a_stacked_bar_a_side_and_leads_its_findings_with_the_line() -> None:
    item = clocked_ab_item()
    shown = page(RunReport("testbox", {}, [item], sweeps_over([item])))
    assert 'data-chart="where"' in shown
    bars = shown[shown.index('data-chart="where"') :]
    bars = bars[: bars.index("</svg>")]
    for side in ("reference", "candidate"):
        drawn = re.findall(rf'data-component="(\w+)" data-side="{side}" x="[\d.]+" y="\d+" width="([\d.]+)"', bars)
        assert [name for name, _ in drawn] == ["queue", "prefill", "decode", "client"], side
    widths = {}
    for side in ("reference", "candidate"):
        found = re.search(rf'data-component="queue" data-side="{side}" x="[\d.]+" y="\d+" width="([\d.]+)"', bars)
        assert found is not None, side
        widths[side] = float(found[1])
    assert widths["candidate"] > 10 * widths["reference"], "the candidate's longer wait is the longer queue bar"
    assert "where the time went: queue +0.3" in shown


def test_the_markdown_summary_prints_each_comparisons_where_line() -> None:
    summary = markdown(RunReport("cpu", {}, [clocked_ab_item()], []))
    section = summary[summary.index("#### Where the time went\n\n") :].splitlines()[2:4]
    assert section[0].startswith("- `tests/test_x.py::test_slots` throughput x"), "the gated throughput's factors lead"
    assert section[1].startswith("- `tests/test_x.py::test_slots` where the time went: queue +0.3")
