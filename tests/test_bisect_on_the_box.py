"""A bisect through pytest itself, on the fake box (pytest_swarm.testing): the servers' speeds are declared, so each
step's verdict follows from the gate's statistics, and the search, the retry, the reports and the bad input are the
plugin's own. The search's arithmetic is tests/gate/test_bisection.py's; real releases are the engine tier's."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from pytest_swarm import Server
from pytest_swarm.gate.bisection import Finding, finding_of, most_steps
from pytest_swarm.gate.statistics import Verdict
from pytest_swarm.specs.changes import differences, with_changes
from pytest_swarm.stores.history import open_store
from pytest_swarm.testing import FakeBox, Faults

HW = "--swarm-hardware=testbox"
BUILDS = [Server.llamacpp(threads=2, env={"BUILD": str(i)}) for i in range(8)]
SUITE = """
import pytest
from pytest_swarm import Server

SERVERS = [Server.llamacpp(threads=2, env={{"BUILD": str(i)}}) for i in range({count})]

@pytest.mark.swarm(bisect=SERVERS, max_tokens=16{extra})
def test_bisect(swarm):
    swarm.run()
"""


def _bisect(pytester: pytest.Pytester, box: FakeBox, count: int = 8, extra: str = "") -> tuple[pytest.RunResult, Any]:
    pytester.makepyfile(test_bisect=SUITE.format(count=count, extra=extra))
    result = pytester.runpytest(HW, "-v", "-p", "no:cacheprovider", "--swarm-json=out.json", plugins=[box])
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    return result, document


def _planted(changed_at: int, slower: float = 70.0, seed: int = 0, noise: float = 0.02) -> FakeBox:
    return FakeBox(
        {spec: (100.0 if i < changed_at else slower) for i, spec in enumerate(BUILDS)}, noise=noise, seed=seed
    )


@pytest.mark.parametrize("changed_at", [1, 4, 7])
def test_a_planted_slowdown_is_named_within_the_bound_with_every_step_reported(
    pytester: pytest.Pytester, changed_at: int
) -> None:
    """Eight servers, the 100 tok/s of the first ones dropping to 70 from a known index: the bisect names that index,
    the ends' A/B fails the item (a regression), and the JSON carries each step and the culprit pair."""
    box = _planted(changed_at)
    result, document = _bisect(pytester, box)
    result.assert_outcomes(failed=1)
    bisect = document["bisect"]
    assert bisect["first_changed"] == changed_at and bisect["left"] is None and bisect["no_change"] is False
    steps = bisect["steps"]
    assert len(steps) <= most_steps(8) == 4 and steps[0]["probe"] == 7 and steps[0]["finding"] == "differs"
    assert {s["probe"] for s in steps if s["finding"] == "differs"} >= {changed_at}
    for step in steps:
        assert step["finding"] == ("differs" if step["probe"] >= changed_at else "same")
        assert step["figure"] == "effective_tps" and step["lower"] <= step["ratio"] <= step["upper"]
        assert step["pairs"] >= 1 and step["seconds"] >= 0
    culprit = bisect["culprit"]
    assert culprit["before"] == changed_at - 1 and culprit["after"] == changed_at
    assert culprit["differences"] == ["env BUILD set -> changed"]
    assert culprit["where_time_went"][0]["component"] == "decode" and culprit["where_time_went"][0]["change_s"] > 0
    result.stdout.fnmatch_lines(
        [
            "  test_bisect: bisect step in #0..#7: #7 env BUILD=changed against #0: differs (fail effective_tps x0.*",
            f"test_bisect: bisect of 8 servers against #0 llamacpp:gemma3-270m x1: first changed: #{changed_at} *",
            f"  #{changed_at} env BUILD=changed against #0: effective_tps x0.*; where the time went: decode +*",
        ]
    )
    assert document["gate"]["verdict"] == "fail" and document["reference"] is not None


def test_a_speedup_is_found_either_way_and_passes_but_not_when_only_worse_is_asked(pytester: pytest.Pytester) -> None:
    """From index 5 the servers are faster: the default bisect finds it (and the item passes: the last server is no
    regression); bisect_direction="worse" sees no change."""
    box = _planted(5, slower=140.0)
    result, document = _bisect(pytester, box)
    result.assert_outcomes(passed=1)
    assert document["bisect"]["first_changed"] == 5
    assert document["bisect"]["steps"][0]["finding"] == "differs"
    result, document = _bisect(pytester, _planted(5, slower=140.0), extra=', bisect_direction="worse"')
    result.assert_outcomes(passed=1)
    assert document["bisect"]["no_change"] is True and len(document["bisect"]["steps"]) == 1
    result.stdout.fnmatch_lines(["*: no change: #7 env BUILD=changed shown the same as #0, in 1 steps, * s"])


def test_ends_that_do_not_differ_end_at_the_first_step(pytester: pytest.Pytester) -> None:
    result, document = _bisect(pytester, _planted(8))
    result.assert_outcomes(passed=1)
    assert document["bisect"]["no_change"] is True and document["bisect"]["first_changed"] is None
    assert [s["probe"] for s in document["bisect"]["steps"]] == [7]


def test_an_undecided_step_is_measured_again_at_twice_the_budget_then_the_range_left_is_reported(
    pytester: pytest.Pytester,
) -> None:
    """A 4% change under 5% noise cannot decide in three pairs: the ends' step is measured once more with six, still
    undecided, and the search reports the range left rather than guess."""
    box = FakeBox({spec: (100.0 if i < 3 else 96.0) for i, spec in enumerate(BUILDS)}, noise=0.05, seed=4)
    result, document = _bisect(pytester, box, extra=", max_pairs=3")
    bisect = document["bisect"]
    assert [(s["probe"], s["retry"], s["finding"]) for s in bisect["steps"]] == [
        (7, False, "undecided"),
        (7, True, "undecided"),
    ]
    assert bisect["steps"][0]["pairs"] == 3 and bisect["steps"][1]["pairs"] == 6
    assert bisect["left"] == [0, 7] and bisect["first_changed"] is None
    result.stdout.fnmatch_lines(["*: undecided: the change lies after #0 and at or before #7;*, in 2 steps, * s"])
    assert document["gate"]["verdict"] == "inconclusive"


def test_a_server_that_fails_to_boot_is_that_steps_result_and_the_bisect_goes_on(pytester: pytest.Pytester) -> None:
    """From index 6 the builds do not boot: the step says so and counts it as a change; index 6 is named."""
    box = FakeBox(
        dict.fromkeys(BUILDS, 100.0),
        faults={spec: Faults(boot_error="server died before it was ready (exit status 1)") for spec in BUILDS[6:]},
    )
    result, document = _bisect(pytester, box)
    bisect = document["bisect"]
    assert bisect["first_changed"] == 6
    failed = [s for s in bisect["steps"] if s["crash"]]
    assert failed and all(s["finding"] == "differs" and s["probe"] >= 6 for s in failed)
    assert "failed to boot: fake box: llamacpp:gemma3-270m x1: server died before it was ready" in failed[0]["crash"]
    result.stdout.fnmatch_lines(["*first changed: #6 env BUILD=changed (#5 shown the same as #0)*"])


def test_a_release_between_the_ends_that_cannot_be_installed_is_that_steps_result_and_the_bisect_goes_on(
    pytester: pytest.Pytester,
) -> None:
    """Build #5 of eight cannot be installed: set-up goes on, and its step says so with pip's words, boots nothing and
    counts it as a change, as a server that fails to boot; the search goes on to #4 and names #5."""
    pip_said = "ERROR: Failed building wheel for xllamacpp"
    box = _planted(6)
    box.faults[BUILDS[5]] = Faults(install_error=pip_said)
    result, document = _bisect(pytester, box)
    bisect = document["bisect"]
    assert [s["probe"] for s in bisect["steps"]] == [7, 3, 5, 4]
    assert bisect["first_changed"] == 5
    (failed,) = [s for s in bisect["steps"] if s["crash"]]
    assert failed["probe"] == 5 and failed["finding"] == "differs" and failed["pairs"] == 0
    assert failed["crash"] == f"failed to install: fake box: {BUILDS[5].label} could not be installed: {pip_said}"
    assert BUILDS[5] not in [spec for spec, _count in box.boots], "never booted"
    result.stdout.fnmatch_lines(["*first changed: #5 env BUILD=changed (#4 shown the same as #0)*"])


@pytest.mark.parametrize(
    ("index", "pip_said"),
    [
        (0, "ERROR: Failed building wheel for xllamacpp"),
        (7, "ERROR: Failed building wheel for xllamacpp"),
        (4, "ERROR: No matching distribution found for xllamacpp==2026.7.1"),
    ],
)
def test_an_end_that_cannot_be_installed_or_a_release_the_index_lacks_stops_the_run_at_set_up(
    pytester: pytest.Pytester, index: int, pip_said: str
) -> None:
    """The ends must be measured, and a release the index does not hold is a name to correct, wherever it sits."""
    box = FakeBox(faults={BUILDS[index]: Faults(install_error=pip_said)})
    pytester.makepyfile(test_bisect=SUITE.format(count=8, extra=""))
    result = pytester.runpytest(HW, "-p", "no:cacheprovider", plugins=[box])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*fake box: llamacpp:* could not be installed: {pip_said}*"])
    assert box.boots == []


def test_a_first_server_that_fails_to_boot_fails_the_item_with_its_words(pytester: pytest.Pytester) -> None:
    box = FakeBox(faults={BUILDS[0]: Faults(boot_error="server died before it was ready (exit status 1)")})
    pytester.makepyfile(test_bisect=SUITE.format(count=4, extra=""))
    result = pytester.runpytest(HW, "-p", "no:cacheprovider", plugins=[box])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fake box: llamacpp:gemma3-270m x1: server died before it was ready*"])


def test_a_first_server_that_dies_mid_step_stops_the_search_saying_so(pytester: pytest.Pytester) -> None:
    box = _planted(5)
    box.faults[BUILDS[0]] = Faults(crash_at_round=2)
    result, document = _bisect(pytester, box)
    result.assert_outcomes(failed=1)
    (step,) = document["bisect"]["steps"]
    assert "killed by signal 9 during round 2" in step["crash"]
    result.stdout.fnmatch_lines(
        ["*: stopped: the first server died (*killed by signal 9*); nothing after it compares*"]
    )


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (", server=Server.llamacpp()", "argument server: a bisect's servers are its list*drop server="),
        (", reference=Server.llamacpp()", "argument reference: a bisect's servers are its list*"),
        (", capacity={'concurrency': (1, 4)}", "argument capacity: a bisect's servers are its list*"),
        (", canary=Server.llamacpp()", "argument canary: a bisect's servers are its list*"),
        (", boots=3", "argument boots: an A/B item plays pairs until its claims are decided (so does a bisect's*"),
        (", gate=[]", "argument bisect: with gate=[] there is no claim to find a change in*"),
        (", bisect_direction='sideways'", "argument bisect_direction='sideways': expected one of 'either', 'worse'*"),
    ],
)
def test_a_bisect_asked_wrongly_fails_at_set_up_naming_the_argument(
    pytester: pytest.Pytester, extra: str, said: str
) -> None:
    box = FakeBox()
    pytester.makepyfile(test_bisect=SUITE.format(count=3, extra=extra))
    result = pytester.runpytest(HW, "-p", "no:cacheprovider", plugins=[box])
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{said}"])
    assert box.boots == [], "nothing booted"


def test_a_list_of_one_server_is_refused(pytester: pytest.Pytester) -> None:
    box = FakeBox()
    pytester.makepyfile(test_bisect=SUITE.format(count=1, extra=""))
    result = pytester.runpytest(HW, "-p", "no:cacheprovider", plugins=[box])
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*argument bisect=*: expected a list of two or more server specs in order*"])


@pytest.mark.parametrize(
    ("worse", "better", "found"),
    [
        (Verdict.FAIL, None, Finding.DIFFERS),
        (Verdict.PASS, None, Finding.SAME),
        (Verdict.INCONCLUSIVE, None, Finding.UNDECIDED),
        (Verdict.PASS, Verdict.FAIL, Finding.DIFFERS),
        (Verdict.PASS, Verdict.PASS, Finding.SAME),
        (Verdict.PASS, Verdict.INCONCLUSIVE, Finding.UNDECIDED),
        (Verdict.FAIL, Verdict.INCONCLUSIVE, Finding.DIFFERS),
    ],
)
def test_a_steps_finding_reads_its_claims_both_ways(worse: Verdict, better: Verdict | None, found: Finding) -> None:
    assert finding_of(worse, better) is found


def test_the_html_report_shows_the_bisects_steps_and_its_answer(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bisect=SUITE.format(count=4, extra=""))
    box = FakeBox({spec: (100.0 if i < 2 else 70.0) for i, spec in enumerate(BUILDS)})
    result = pytester.runpytest(HW, "-p", "no:cacheprovider", "--swarm-html=report.html", plugins=[box])
    result.assert_outcomes(failed=1)
    page = (pytester.path / "report.html").read_text()
    assert '<table class="gate bisect"><caption>bisect of 4 servers: first changed: #2 env BUILD=changed' in page
    assert "(env BUILD set -&gt; changed)</caption>" in page
    table = page[page.index('<table class="gate bisect">') :]
    body = table[table.index("<tbody>") : table.index("</tbody>")]
    assert body.count("<tr>") == 3, "a row a step: #3, #1, #2"
    assert "<td>#0..#3</td><td>#3 env BUILD=changed</td><td>differs</td>" in page


FIRST = Server.llamacpp(threads=2)
CHANGED = Server.llamacpp(threads=1, ctx=4096, extra_args=["--batch-size", "256", "--no-mmap"], env={"X": "1"})
FLAGS = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(
    bisect=[
        Server.llamacpp(threads=2),
        Server.llamacpp(threads=1, ctx=4096, extra_args=["--batch-size", "256", "--no-mmap"], env={"X": "1"}),
    ],
    max_tokens=16,
)
def test_flags(swarm):
    swarm.run()
"""


def _flag_box(slower: set[str], together: bool = False) -> FakeBox:
    """A box on which the first spec with any (or, `together`, all) of the `slower` changes decodes at 70, else 100."""
    names = [d.name for d in differences(FIRST, CHANGED)]
    speed = {}
    for size in range(len(names) + 1):
        for subset in itertools.combinations(names, size):
            hit = slower <= set(subset) if together else bool(slower & set(subset))
            speed[with_changes(FIRST, CHANGED, subset)] = 70.0 if hit else 100.0
    return FakeBox(speed)


def test_a_flag_search_names_the_one_change_of_five_that_makes_it_slower(pytester: pytest.Pytester) -> None:
    """Two servers five changes apart (two flags, an env entry, two fields); only threads 2 -> 1 slows it: the flag
    search names that change alone, in fewer steps than trying each change."""
    pytester.makepyfile(test_flags=FLAGS)
    box = _flag_box({"threads"})
    result = pytester.runpytest(HW, "-v", "-p", "no:cacheprovider", "--swarm-json=out.json", plugins=[box])
    result.assert_outcomes(failed=1)
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    bisect = document["bisect"]
    assert bisect["changes"] == [
        "arg --batch-size unset -> 256",
        "arg --no-mmap unset -> set",
        "env X unset -> set",
        "ctx 2048 -> 4096",
        "threads 2 -> 1",
    ]
    assert bisect["carried_by"] == [4] and bisect["culprit"]["differences"] == ["threads 2 -> 1"]
    assert bisect["steps"][0]["applied"] == [0, 1, 2, 3, 4] and len(bisect["steps"]) <= 1 + 2 * 3
    result.stdout.fnmatch_lines(
        [
            "  test_flags: flag search over the 5 changes from llamacpp:gemma3-270m x1 to the second server: *",
            "test_flags: flag search over 5 changes against #0 llamacpp:gemma3-270m x1: carried by threads=1 alone, *",
            "  threads=1 against #0: effective_tps x0.*; where the time went: decode +*",
        ]
    )


def test_changes_that_slow_it_only_together_are_named_together(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_flags=FLAGS)
    box = _flag_box({"ctx", "env X"}, together=True)
    result = pytester.runpytest(HW, "-p", "no:cacheprovider", "--swarm-json=out.json", plugins=[box])
    result.assert_outcomes(failed=1)
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert document["bisect"]["carried_by"] == [2, 3]
    result.stdout.fnmatch_lines(["*carried by env X=set, ctx=4096 together, each needed*"])


def test_a_bisects_steps_go_into_the_results_history_with_its_item(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bisect=SUITE.format(count=4, extra=""))
    box = FakeBox({spec: (100.0 if i < 2 else 70.0) for i, spec in enumerate(BUILDS)})
    history = pytester.path / "history.sqlite"
    result = pytester.runpytest(HW, "-p", "no:cacheprovider", f"--swarm-history={history}", plugins=[box])
    result.assert_outcomes(failed=1)
    store = open_store(str(history))
    assert store is not None
    (run,) = store.runs()
    steps = store.bisect_steps(run.run_id, "test_bisect.py::test_bisect")
    assert [(s.probed, s.finding) for s in steps] == [
        ("#3 env BUILD=changed", "differs"),
        ("#1 env BUILD=changed", "same"),
        ("#2 env BUILD=changed", "differs"),
    ]
    assert all(s.ratio is not None and s.pairs > 0 for s in steps)
