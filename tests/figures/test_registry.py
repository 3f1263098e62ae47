"""The figure registry: each figure declared once, and everything that names figures reads it.

The last test adds a figure the way docs/guides/extend.md shows (one entry, one function) and follows it into the
scalars, the per-round gate, the JSON report, the marker's limits and expectations, its direction and the report's
facet line.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_swarm import Server
from pytest_swarm.core.figure_names import DEFAULT_GATE, HIGHER, LOWER
from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures import registry
from pytest_swarm.figures.facets import Facets, scalar_of
from pytest_swarm.figures.figure import AGENT, ANSWERS, CAPACITY, CORE, MEMORY, Figure
from pytest_swarm.figures.registry import (
    FAILURE_FIGURES,
    FIGURES,
    direction_of,
    gateable,
    limitable,
    of_facet,
    stored,
)
from pytest_swarm.figures.summary import ItemFigures, round_figures, summarize
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.report.facet_lines import facet_text
from pytest_swarm.specs import SpecError

ROOT = Path(__file__).resolve().parents[2]


def _record(agent: int, start: float, first: float, last: float, tokens: int = 4) -> RequestRecord:
    times = [first + (last - first) * i / (tokens - 1) for i in range(tokens)]
    return RequestRecord(agent, start, end=last + 0.01, token_times=times, output_tokens=tokens, usage_reported=True)


def _rounds() -> list[RoundRecord]:
    return [
        RoundRecord(concurrency=2, wall_s=2.0, requests=[_record(0, 0.0, 0.1, 0.7), _record(1, 0.0, 0.2, 1.2)]),
        RoundRecord(concurrency=2, wall_s=2.0, requests=[_record(0, 0.0, 0.1, 0.5), _record(1, 0.0, 0.3, 0.9)]),
    ]


def test_importing_the_registry_loads_neither_numpy_nor_scipy() -> None:
    """The marker validates figure names at collection: the registry must stay cheap to import."""
    probe = "import sys, pytest_swarm.figures.registry; print(sorted({'numpy', 'scipy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_each_figure_is_declared_once_in_a_facet_the_result_holds() -> None:
    names = [f.name for f in FIGURES]
    assert len(names) == len(set(names)), "a name declared twice"
    facets = {f.name for f in dataclasses.fields(Facets)}
    for figure in FIGURES:
        assert figure.direction in (HIGHER, LOWER), figure.name
        assert figure.doc and figure.unit, figure.name
        if figure.facet == CORE:
            assert hasattr(ItemFigures, figure.name) or figure.name in ItemFigures.__dataclass_fields__, figure.name
        elif figure.facet != CAPACITY:
            assert figure.facet in facets, f"{figure.name}: facet {figure.facet} is no field of Facets"
        if figure.per_request is not None or figure.of_item is not None:
            assert figure.facet not in (CORE, CAPACITY) or figure.per_request is not None, figure.name
        assert set(figure.gated_scalars) <= set(figure.scalars), figure.name


def test_the_defaults_and_the_failure_figures_are_registry_names() -> None:
    assert set(DEFAULT_GATE) <= set(gateable())
    assert set(FAILURE_FIGURES) <= set(limitable())
    assert set(gateable()) <= set(limitable()), "a gateable figure is limitable"


def test_the_scalars_the_json_and_the_round_figures_are_the_registrys() -> None:
    result = summarize(_rounds())
    scalars = result.scalars()
    assert list(scalars) == [name for f in stored() for name in f.scalars]
    document = result.figures()
    for figure in FIGURES:  # each where its facet puts it: the typed facets' nested, the derived share read from two
        if figure.facet == AGENT:
            assert figure.name in document["agent"], figure.name
        elif figure.facet not in (MEMORY, CAPACITY) and figure.name != "failure_share":
            assert figure.name in document, figure.name
    assert set(round_figures(_rounds()[0]).figures) == {*gateable()} - {"goodput_share"}
    for figure in stored():
        value = result.value(figure)
        for name in figure.scalars:
            stat = name.rsplit(".", 1)[1] if figure.stats else None
            expected = scalar_of(value, stat)
            assert scalars[name] == (None if expected is None else pytest.approx(float(expected))), name


def test_direction_is_the_entrys_and_lower_for_an_undeclared_name() -> None:
    assert direction_of("effective_tps") == HIGHER and direction_of("per_request_tps.min") == HIGHER
    assert direction_of("ttft.p95") == LOWER and direction_of("speedup") == HIGHER
    assert direction_of("cut_share") == LOWER, "an added figure's"


def _decode_s(record: RequestRecord) -> float | None:
    """The function: seconds from the first token to the last."""
    return record.token_times[-1] - record.token_times[0] if len(record.token_times) >= 2 else None


DECODE_S = Figure(
    "decode_s",
    ANSWERS,
    "s",
    LOWER,
    "seconds from an answer's first token to its last",
    label="decode",
    stats=("p50", "p95"),
    gated=("p50",),
    per_request=_decode_s,
)
"""The entry, as the extend guide writes it."""


def test_a_figure_added_as_one_entry_and_one_function_reaches_every_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "FIGURES", (*FIGURES, DECODE_S))
    result = summarize(_rounds())
    spans = sorted(_decode_s(r) or 0.0 for round_ in _rounds() for r in round_.requests)
    assert result.facets.answers.distribution("decode_s").n == 4 and result.facets.answers.distribution(
        "decode_s"
    ).max == pytest.approx(spans[-1])
    assert result.scalars()["decode_s.p95"] == pytest.approx(result.facets.answers.distribution("decode_s").p95)
    assert "decode_s.p50" in result.rounds[0].figures, "gated: measured per round, for the baseline"
    assert result.figures()["decode_s"]["p50"] == result.facets.answers.distribution("decode_s").p50
    assert "decode_s.p95" in limitable() and "decode_s.p50" in gateable() and "decode_s.p95" not in gateable()
    assert direction_of("decode_s.p50") == LOWER
    config = parse_marker(
        (), {"slo": {"decode_s.p95": "< 2"}, "reference": Server.llamacpp(), "expect": {"decode_s.p50": "<= 1.1"}}
    )
    assert [name for name, _ in config.criteria.slo] == ["decode_s.p95"]
    assert [name for name, _ in config.criteria.expect] == ["decode_s.p50"]
    assert parse_marker((), {"gate": ["decode_s.p50"]}).criteria.gate == ("decode_s.p50",)
    with pytest.raises(SpecError, match="argument gate"):
        parse_marker((), {"gate": ["decode_s.p95"]})  # declared, but not gated per round
    assert "decode p50" in facet_text(result, of_facet(ANSWERS)), "the report's facet line renders it by its entry"


def test_without_the_entry_the_marker_refuses_the_name() -> None:
    with pytest.raises(SpecError, match="argument slo"):
        parse_marker((), {"slo": {"decode_s.p95": "< 2"}})
