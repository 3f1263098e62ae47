"""The terminal table and notes: compact by default within its width (TABLE_WIDTH), every column under -v, C and W apart."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures.summary import summarize
from pytest_swarm.gate.capacity import CapacityFound, CapacitySearch, Step
from pytest_swarm.gate.notes import CapacityUndecided
from pytest_swarm.gate.statistics import Verdict
from pytest_swarm.gate.verdict import evaluate, evaluate_capacity
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.report.facet_lines import workload_lines
from pytest_swarm.report.html import page
from pytest_swarm.report.json_report import json_document
from pytest_swarm.report.text import (
    COLUMNS,
    TABLE_WIDTH,
    calibration_lines,
    capacity_lines,
    markdown,
    note_lines,
    table,
    warnings_for,
)
from pytest_swarm.results.item import Capacity, ItemResult
from pytest_swarm.results.run import RunReport
from pytest_swarm.settings import GateSettings
from pytest_swarm.specs import in_units
from tests.factories import ab_item, item_result, sweeps_over


def _round(agents: int, workers: int = 1) -> RoundRecord:
    requests = [
        RequestRecord(
            agent=a,
            start=0.0,
            worker=a % workers,
            end=1.0,
            token_times=[0.1 + 0.01 * i for i in range(8)],
            output_tokens=8,
        )
        for a in range(agents)
    ]
    return RoundRecord(concurrency=agents, wall_s=1.0, requests=requests)


def _items(long_names: bool = False) -> list[ItemResult]:
    config = parse_marker((), {"concurrency": [1, 4]})
    name = "test_a_rather_long_test_name_that_describes_the_experiment_in_full" if long_names else "test_sweep"
    items = []
    for level in (1, 4):
        result = summarize([_round(level)])
        outcome = evaluate(result, config.criteria, None, GateSettings())
        items.append(
            item_result(f"tests/test_x.py::{name}[c{level}]", f"tests/test_x.py::{name}", config, result, outcome)
        )
    return items


def test_the_default_table_shows_the_first_figures_and_fits_its_width() -> None:
    lines = table(_items(long_names=True), verbose=False)
    assert all(len(line) <= TABLE_WIDTH for line in lines), [len(line) for line in lines]
    header = lines[0].split()
    assert header[:2] == ["test", "server"] and "contention" not in header and "RSS/PSS" not in header
    assert lines[2].startswith("…") and "[c1]" in lines[2], "a shortened name keeps its end: the level id"
    assert "W" not in header, "no process-mode item: no workers column"
    assert lines[2].rstrip().endswith("no baseline")


def test_verbose_shows_every_column_and_markdown_keeps_them() -> None:
    items = _items(long_names=True)
    header = table(items, verbose=True)[0]
    for column in COLUMNS:
        if column.title != "W":
            assert column.title in header
    assert len(table(items, verbose=True)[2]) > TABLE_WIDTH, "the verbose table is not cut to fit"
    assert "| contention |" in markdown(RunReport("hw", {}, items, [])) and "| RSS/PSS MiB |" in markdown(
        RunReport("hw", {}, items, [])
    )


def _cells(lines: list[str]) -> dict[str, str]:
    """The first row's cells by column title, cut where the rule's dashes are."""
    header, rule, row = lines[:3]
    cells = {}
    start = 0
    for dashes in rule.split("  "):
        cells[header[start : start + len(dashes)].strip()] = row[start : start + len(dashes)].strip()
        start += len(dashes) + 2
    return cells


def test_the_table_leads_with_the_peers_first_figures_and_verbose_adds_their_means() -> None:
    """Requests a second and output tokens a second first after the level, as vLLM bench and guidellm print them; -v
    and the Markdown add total tok/s and the TTFT, TPOT and ITL means. Four requests in a 1 s round, each a first
    token at 0.1 s then a token every 10 ms: 4 req/s, TTFT 0.1 s, TPOT and ITL 10 ms; no prompt count, no total."""
    config = parse_marker((), {"concurrency": 4})
    item = item_result("t.py::t[c4]", "t.py::t", config, summarize([_round(4)]))
    compact = table([item], verbose=False)
    assert compact[0].split()[2:6] == ["C", "req/s", "eff", "tok/s"]
    assert _cells(compact)["req/s"] == "4.00"
    cells = _cells(table([item], verbose=True))
    assert [cells[t] for t in ("total tok/s", "TTFT mean", "TPOT mean", "ITL mean")] == [
        "-",
        "0.100",
        "0.0100",
        "0.0100",
    ]
    assert "| req/s | eff tok/s | total tok/s |" in markdown(RunReport("hw", {}, [item], []))


def test_process_mode_reports_agents_per_server_and_workers_apart() -> None:
    config = parse_marker((), {"mode": "process", "workers": [4], "concurrency": 2})
    result = summarize([_round(8, workers=4)], workers=4)
    item = item_result("t.py::t[w4]", "t.py::t", config, result)
    cells = _cells(table([item], verbose=False))
    assert (cells["C"], cells["W"]) == ("2", "4")
    document = json_document(RunReport("hw", {}, [item], sweeps_over([item])))["tests"][0]
    assert (document["concurrency"], document["workers"], document["agents"]) == (2, 4, 8)


def test_no_baseline_is_said_once_with_the_count_and_the_command() -> None:
    lines = note_lines(_items(), "cpu-xeon-2c")
    assert lines == [
        "2 of 2 items have no baseline for hardware 'cpu-xeon-2c': record them with "
        "pytest --swarm-hardware=cpu-xeon-2c --swarm-update-baselines (then review and commit the YAML)"
    ]


def test_an_ab_item_shows_its_reference_row_with_the_ratio_and_bound() -> None:
    """Two rows within the table width: the candidate's with its verdict, the reference's with measured/reference and the PASS bound."""
    item = ab_item()
    headline = next(c for c in item.outcome.comparisons if c.expected) if item.outcome else None
    assert headline is not None
    lines = table([item], verbose=False)
    assert all(len(line) <= TABLE_WIDTH for line in lines)
    assert "x4" in lines[2] and lines[2].rstrip().endswith(item.outcome.verdict.value if item.outcome else "?")
    assert lines[3].startswith("  vs reference") and "x1" in lines[3]
    assert lines[3].rstrip().endswith(f"x{headline.raw_ratio:.2f} [{headline.raw_bounds[0]:.2f},-]")
    text = markdown(RunReport("hw", {}, [item], []))
    assert "| vs baseline / reference |" in text and "effective_tps x2.00 [" in text and "expected >= 1.3" in text
    assert "|   vs reference | llamacpp:gemma3-270m x1 |" in text
    document = json_document(RunReport("hw", {}, [item], sweeps_over([item])))["tests"][0]
    assert document["gate"]["against"] == "reference"
    assert document["reference"]["server"]["slots"] == 1 and document["reference"]["figures"]["effective_tps"] > 0
    assert {c["expected"] for c in document["gate"]["comparisons"]} == {None, ">= 1.3"}


def test_short_answers_are_explained_by_the_protocol_the_server_was_measured_through() -> None:
    """Ollama's API has no ignore_eos: short answers there are the model's end-of-sequence, said so, whatever the engine."""
    config = parse_marker((), {"concurrency": 2})
    result = summarize([_round(2)], pinned_tokens=16)  # 8 tokens each where 16 were pinned
    assert result.facets.answers.short_outputs == 2

    def warning(protocol: str) -> str:
        (line,) = warnings_for(
            [item_result("t.py::test_x[c2]", "t.py::test_x", config, result, info={"protocol": protocol})]
        )
        return line

    assert warning("ollama") == (
        "t.py::test_x[c2]: 2 answers where eval_count fell short of num_predict "
        "(Ollama has no ignore_eos: the model stopped at its end-of-sequence token)"
    )
    assert (
        warning("openai") == "t.py::test_x[c2]: 2 answers shorter than the pinned max_tokens (ignore_eos not honoured?)"
    )


def test_calibration_of_an_item_measured_in_pairs_speaks_of_its_samples_not_boots_a_side() -> None:
    """An A/B item is decided by the confidence sequence over its samples: calibration gives their spread and how many."""
    item = ab_item()  # two boots a side: two samples whose log ratios differ by a hair
    (line,) = [line for line in calibration_lines([item], 0.01, 0.05) if " effective_tps:" in line]
    assert line.startswith("tests/test_x.py::test_four_beat_one effective_tps: log-ratio spread 0.0")
    assert "between 2 samples of 1.0 pairs; about " in line and "FAIL a 10% drop at alpha 0.01" in line
    assert "boots a side" not in line


def test_calibration_of_a_tolerance_of_half_or_more_caps_the_drop_it_speaks_of() -> None:
    item = ab_item()
    wide = replace(
        item,
        item=replace(item.item, config=replace(item.config, criteria=replace(item.config.criteria, tolerance=0.6))),
    )
    (line,) = [line for line in calibration_lines([wide], 0.01, 0.05) if " effective_tps:" in line]
    assert line.endswith("FAIL a 99% drop at alpha 0.01")


def test_a_fitted_trace_says_in_the_report_what_was_changed(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "".join(
            f'{{"timestamp": {100 * k}, "input_length": 40, "output_length": 8, "hash_ids": [1, 2, 3]}}\n'
            for k in range(6)
        )
    )
    config = parse_marker(
        (), {"trace": "t.jsonl", "trace_block": 16, "trace_window": 3, "trace_max_output": 4}, rootdir=tmp_path
    )
    item = item_result("t.py::test_trace", "t.py::test_trace", config, summarize([_round(2)]))
    (line,) = [line for line in workload_lines([item]) if "fitted" in line]
    assert line == (
        "test_trace: the trace as replayed, fitted to this box: window from 0 s, the first 3: 3 of 6 requests; "
        "answers capped at 4 tokens: 3 cut"
    )


def test_a_capacity_level_is_said_in_its_unit_singular_at_one() -> None:
    """The search's progress lines and the capacity line read "1 worker", not "1 workers"."""
    assert [in_units("workers", 1), in_units("workers", 7), in_units("concurrency", 1), in_units("concurrency", 4)] == [
        "1 worker",
        "7 workers",
        "1 agent",
        "4 agents",
    ]
    assert [in_units("rate", 1), in_units("rate", 2.5)] == ["1 request a second", "2.5 requests a second"]


def test_a_capacity_item_shows_every_level_tried_with_its_verdict_in_each_report() -> None:
    """The terminal's table of steps, the JSON's `capacity`, the HTML's table: the same search, level by level."""
    config = parse_marker((), {"capacity": {"concurrency": (1, 16)}})
    search = CapacitySearch(1, 16, whole=True)
    for level, verdict, tps in ((1, Verdict.PASS, 45.0), (2, Verdict.PASS, 31.0), (4, Verdict.FAIL, 12.0),
                                (3, Verdict.INCONCLUSIVE, 19.5)):  # fmt: skip
        figures = (("ttft.p95", 0.4), ("per_request_tps.median", tps))
        why = "undecided after 12 rounds" if verdict is Verdict.INCONCLUSIVE else None
        search.record(Step(level, verdict, 8, 8 * level, 0, figures, why, 400.0 + level))
    found = CapacityFound("concurrency", 1, 16, tuple(search.steps))
    result = summarize([_round(2)])
    outcome = evaluate_capacity(result, config.criteria, None, GateSettings(), found)
    item = replace(
        item_result("t.py::test_cap", "t.py::test_cap", config, result, outcome, level=1), kind=Capacity(found)
    )
    lines = capacity_lines([item])
    assert lines[0] == "test_cap: capacity 2 agents, where ttft.p95 < 2, per_request_tps.median > 20"
    assert lines[1].split()[:7] == ["concurrency", "verdict", "rounds", "requests", "failed", "RSS", "MiB"]
    assert [line.split()[:2] + line.split()[5:6] for line in lines[2:]] == [
        ["1", "PASS", "401"],
        ["2", "PASS", "402"],
        ["4", "FAIL", "404"],
        ["3", "INCONCLUSIVE", "403"],
    ]
    assert lines[-1].endswith("(undecided after 12 rounds)")
    assert CapacityUndecided("", (3,), "undecided after 12 rounds") in outcome.notes
    (document,) = json_document(RunReport("hw", {}, [item], []))["tests"]
    assert document["capacity"]["capacity"] == 2 and [s["verdict"] for s in document["capacity"]["steps"]] == [
        "pass",
        "pass",
        "fail",
        "inconclusive",
    ]
    assert document["capacity"]["steps"][1]["figures"] == {"ttft.p95": 0.4, "per_request_tps.median": 31.0}
    assert [s["rss_peak_mib"] for s in document["capacity"]["steps"]] == [401, 402, 404, 403]
    html = page(RunReport("hw", {}, [item], []))
    assert "capacity: 2 (concurrency, range 1-16)" in html and html.count("<tr><td>") >= 4
    assert "<th>RSS MiB</th>" in html and "<td>0</td><td>404</td>" in html


def test_an_item_pinned_to_a_datasets_answer_lengths_says_how_they_were_counted() -> None:
    """The terminal and the JSON say whether the server's tokenizer counted the answers or words estimated them."""
    config = parse_marker((), {"max_tokens": 8})
    plain = item_result("t.py::test_lengths", "t.py::test_lengths", config, summarize([_round(2)]))
    counted = replace(plain, answer_lengths="estimated from words (the server has no tokenize route)")
    assert not [line for line in workload_lines([plain]) if "answers pinned" in line]
    assert workload_lines([counted]) == [
        "test_lengths: answers pinned to the lengths the dataset recorded, "
        "estimated from words (the server has no tokenize route)"
    ]
    (document,) = json_document(RunReport("hw", {}, [counted], []))["tests"]
    assert document["answer_lengths"] == counted.answer_lengths
