"""A marker's items as a Sweep: its own C=1 item, the level a limit could not be read against named, figures computed once."""

from __future__ import annotations

from dataclasses import replace

from pytest_swarm import Server
from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures.summary import summarize
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.report.text import sweep_lines
from pytest_swarm.results.item import ItemResult
from pytest_swarm.results.sweeps import Sweep, sweeps_of
from pytest_swarm.specs import MarkerConfig, PlannedItem

KEY = "tests/test_x.py::test_sweep"


def _items(config: MarkerConfig, levels: list[int], key: str = KEY) -> list[PlannedItem]:
    return [PlannedItem(f"{key}[{config.level_id(n)}]", key, config, n, config.load(n)) for n in levels]


def _measured(item: PlannedItem, seconds: float = 1.0, workers: int = 1) -> ItemResult:
    agents = item.load.concurrency * workers
    requests = [
        RequestRecord(
            agent=a,
            worker=a % workers,
            start=0.0,
            end=seconds,
            token_times=[seconds * (i + 1) / 8 for i in range(8)],
            output_tokens=8,
        )
        for a in range(agents)
    ]
    rounds = [RoundRecord(concurrency=item.load.concurrency, wall_s=seconds, requests=requests)]
    result = summarize(rounds, 8, workers, interactive=item.config.criteria.interactive)
    return ItemResult(item, item.config.server, {}, result)


def test_the_single_agent_result_is_the_c1_item_of_the_same_sweep_and_server() -> None:
    config = parse_marker((), {"concurrency": [1, 4]})
    c1, c4 = _items(config, [1, 4])
    sweep = Sweep(KEY, config, [c1, c4])
    assert sweep.single_agent(config.server) is None, "nothing measured yet"
    measured = _measured(c1)
    sweep.add(measured)
    assert sweep.single_agent(config.server) is measured.result
    assert sweep.single_agent(Server.llamacpp(slots=9)) is None, "another server's C=1 is not this one's"


def test_why_there_is_no_c1_names_the_level_and_the_cause() -> None:
    config = parse_marker((), {"concurrency": [1, 2, 4]})
    c1, c2, c4 = _items(config, [1, 2, 4])
    assert (
        Sweep(KEY, config, [c2, c4]).without_single_agent(c4)
        == "c1 of this sweep was deselected (-k, -m): this run selected c2, c4"
    )
    later = Sweep(KEY, config, [c2, c1])  # --ff or pytest-randomly ran c2 first
    assert later.without_single_agent(c2) == "c1 of this sweep runs after it in this run's order"
    later.end(c1.nodeid)  # c1 ended without a result: skipped, or failed before measuring
    assert later.without_single_agent(c2) == "c1 of this sweep did not measure (skipped or failed)"
    assert Sweep(KEY, config, [c1]).without_single_agent(c1) == "it is the C=1 item itself"
    no_c1 = parse_marker((), {"concurrency": [2, 4]})
    (only,) = _items(no_c1, [4])
    assert Sweep(KEY, no_c1, [only]).without_single_agent(only) == "this sweep has no c1 level (levels c2, c4)"
    agents = parse_marker((), {"mode": "process", "workers": [1, 2], "concurrency": 2})
    (w2,) = _items(agents, [2])
    assert Sweep(KEY, agents, [w2]).without_single_agent(w2) == (
        "this sweep has no one-agent item (each of its workers has 2 agents)"
    )
    rates = parse_marker((), {"rate": [1, 2]})
    (r2,) = _items(rates, [2])
    assert (
        Sweep(KEY, rates, [r2]).without_single_agent(r2)
        == "an open-loop sweep has no C=1 item (its levels are request rates)"
    )


def test_the_figures_are_computed_once_when_the_last_selected_item_ends() -> None:
    config = parse_marker((), {"concurrency": [1, 2, 4]})
    _c1, c2, c4 = _items(config, [1, 2, 4])
    sweep = Sweep(KEY, config, [c2, c4])
    sweep.add(_measured(c2))
    sweep.end(c2.nodeid)
    early = sweep.figures()
    assert not early.complete and early.measured == ("c2",), (
        "before the last item ends, only what measured, marked incomplete"
    )
    sweep.end(c4.nodeid)  # c4 ended without measuring (skipped)
    final = sweep.figures()
    assert final.complete and final.levels == ("c1", "c2", "c4") and final.missing == ("c1", "c4")
    sweep.add(_measured(c4))
    assert sweep.figures() is final, "computed once: a result arriving after the end changes nothing"
    assert sweep_lines([final]) == [f"{KEY}: levels c1, c2, c4; not measured in this run: c1, c4"]


def test_max_interactive_workers_is_the_most_workers_that_stayed_interactive() -> None:
    config = parse_marker(
        (), {"mode": "process", "workers": [1, 2, 4], "interactive": {"per_request_tps.median": "> 5"}}
    )
    w1, w2, w4 = _items(config, [1, 2, 4])
    sweep = Sweep(KEY, config, [w1, w2, w4])
    for item, seconds in ((w1, 1.0), (w2, 1.0), (w4, 4.0)):  # 8 tokens in 4 s: 2 tok/s, not interactive
        sweep.add(_measured(item, seconds, workers=item.load.workers))
        sweep.end(item.nodeid)
    figures = sweep.figures()
    assert figures.process and figures.max_interactive_workers == 2
    assert sweep_lines([figures]) == [f"{KEY}: max_interactive_workers = 2"]


def test_the_run_is_split_into_sweeps_by_key_in_collection_order() -> None:
    config = parse_marker((), {"concurrency": [1, 2]})
    first = _items(config, [1, 2], "t.py::test_a")
    second = _items(config, [2], "t.py::test_b[other]")
    sweeps = sweeps_of(first + second)
    assert list(sweeps) == ["t.py::test_a", "t.py::test_b[other]"]
    assert list(sweeps["t.py::test_a"].selected) == [item.nodeid for item in first]


def test_an_item_cut_short_leaves_its_sweep_partial_and_the_levels_read_in_the_markers_order() -> None:
    config = parse_marker(
        (), {"mode": "process", "workers": [1, 2, 4], "interactive": {"per_request_tps.median": "> 5"}}
    )
    w1, w2, w4 = _items(config, [1, 2, 4])
    sweep = Sweep(KEY, config, [w4, w2, w1])  # played in reverse
    for item in (w4, w2):
        sweep.add(_measured(item, 1.0, workers=item.load.workers))
        sweep.end(item.nodeid)
    sweep.add(replace(_measured(w1, 1.0), incomplete=True))  # Ctrl-C during w1: measured in part, never ended
    figures = sweep.figures()
    assert not figures.complete and figures.measured == ("w2", "w4"), "the partial level is not a level measured"
    assert figures.max_interactive_workers == 4
