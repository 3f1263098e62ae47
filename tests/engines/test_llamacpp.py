"""End to end on the real embedded engine: llama.cpp (xllamacpp) serving Gemma 3 270M on CPU.

Each test runs pytest in a subprocess, as a user would, then checks the process
table: no server may outlive the run.
"""

from __future__ import annotations

import json
from fnmatch import fnmatch

import pytest

from pytest_swarm.engines.builds import built
from pytest_swarm.engines.models import embedded_gguf
from tests.conftest import servers_left

pytestmark = pytest.mark.e2e(reason="llama.cpp's own slots, timings, boot failure and cleanup, and its oldest release")


def test_a_short_sweep_measures_reports_and_cleans_up(pytester: pytest.Pytester, tagged: str) -> None:
    pytester.makepyfile(
        test_sweep="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=[1, 2], max_tokens=8, rounds=2)
        def test_sweep(swarm):
            result = swarm.run()
            assert result.failures == 0
            assert result.output_tokens == 8 * swarm.concurrency * 2

        # the oldest xllamacpp release the look-alike runs on (pyproject's lower bound), installed from the index
        @pytest.mark.swarm(server=Server.llamacpp(version="2026.4.8672"), max_tokens=8, rounds=1)
        def test_oldest(swarm):
            assert swarm.run().failures == 0
        """
    )
    installed = built("xllamacpp", "2026.4.8672") is not None  # an earlier run's, found in the model cache
    result = pytester.runpytest_subprocess("-v", "--swarm-json=figures.json", "--swarm-hardware=testbox")
    result.assert_outcomes(passed=3)
    said = "swarm: installing xllamacpp 2026.4.8672 from the package index into *(once)"
    assert (not installed) == any(fnmatch(line, said) for line in result.outlines), "installed when not there only"
    assert built("xllamacpp", "2026.4.8672") is not None
    result.stdout.fnmatch_lines(
        [
            "  test_sweep[[]c1[]]: boot 1/1 round 1/2: 1/1 requests ok, * tok/s, wall * s",
            "  test_sweep[[]c1[]]: boot 1/1 round 2/2: 1/1 requests ok, * tok/s, wall * s",
            "  test_sweep[[]c2[]]: boot 1/1 round 2/2: 2/2 requests ok, * tok/s, wall * s",
            "*swarm figures (testbox)*",
            "test *server*C*eff tok/s*req tok/s med*min*TTFT p50*p95*wall s*contention*speedup*fail*cached*verdict",
            "test_sweep[[]c1[]]*llamacpp:gemma3-270m x2*1*-*-*0/2*0*no baseline",
            "test_sweep[[]c2[]]*llamacpp:gemma3-270m x2*2*%*0/4*0*no baseline",
        ]
    )
    document = json.loads((pytester.path / "figures.json").read_text())
    assert document["version"] == 1 and document["hardware"] == "testbox"
    c1, c2, oldest = document["tests"]
    assert c1["nodeid"] == "test_sweep.py::test_sweep[c1]" and c2["concurrency"] == 2
    assert c2["server"]["engine"] == "llamacpp" and c2["server"]["slots"] == 2
    assert c2["server"]["engine_version"].startswith("xllamacpp ")
    assert c2["server"]["build"].endswith(", pytest's own environment")
    assert oldest["server"]["engine_version"] == "xllamacpp 2026.4.8672"
    assert oldest["server"]["build"].startswith("xllamacpp 2026.4.8672, installed from the package index into ")
    figures = c2["figures"]
    assert figures["requests"] == 4 and figures["failures"] == 0 and figures["output_tokens"] == 32
    assert figures["cached_prompt_tokens"] == 0, "every prompt is cold"
    assert figures["effective_tps"] > 0 and figures["per_request_tps"]["median"] > 0
    assert 0 < figures["ttft"]["p50"] <= figures["ttft"]["p95"] <= figures["ttft"]["p99"]
    assert figures["itl"]["p50"] > 0 and figures["e2e"]["p95"] > 0
    assert figures["parallelism"] is not None and figures["speedup"] is not None
    assert c1["figures"]["contention"] is None
    # llama.cpp's own clock (prompt_ms + predicted_ms) holds the bulk of a lone request's end to end: what is left (its
    # HTTP front end, the network, the client) is "unaccounted", shown, never folded in, and on the slowest of the two
    # smaller than the server's clock on the quickest (a clock read wrong, or not at all, leaves it all unaccounted)
    alone = c1["figures"]
    assert alone["prefill_time"]["n"] == 2 and alone["decode_time"]["n"] == 2
    served = alone["prefill_time"]["min"] + alone["decode_time"]["min"]
    assert 0 <= alone["unaccounted_time"]["max"] < served, (alone["unaccounted_time"], served)
    assert len(figures["rounds"]) == 2
    assert servers_left(tagged) == []


@pytest.mark.functional
def test_a_slot_count_the_server_did_not_open_fails_clearly(pytester: pytest.Pytester, tagged: str) -> None:
    """The later --parallel wins in llama.cpp's parser: the server opens 3 slots, not the 2 asked for."""
    pytester.makepyfile(
        test_slots="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(slots=2, extra_args=["--parallel", "3"]), max_tokens=4)
        def test_slots(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the server opened 3 slots, the spec asks for 2 (/props total_slots)*"])
    assert servers_left(tagged) == []


@pytest.mark.functional
def test_a_server_that_dies_at_boot_shows_its_exit_and_log(pytester: pytest.Pytester, tagged: str) -> None:
    pytester.makepyfile(
        test_dies="""
        import pytest
        from pytest_swarm import Server

        BROKEN = Server.llamacpp(extra_args=["--no-such-flag"])

        @pytest.mark.swarm(server=BROKEN, concurrency=[1, 2], max_tokens=4)
        def test_dies(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*server died before it was ready (exit status 2)*",
            "*--- last lines of *llamacpp-*.log ---*",
            "*unrecognized arguments: --no-such-flag*",
        ]
    )
    assert servers_left(tagged) == []


SPECULATIVE = """
import pytest
from pytest_swarm import Server

DRAFTED = Server.llamacpp(extra_args=["--model-draft", {draft!r}, "--spec-draft-n-max", "4"])
ITEM = dict(server=DRAFTED, max_tokens=24, rounds=1, temperature=0.0)

@pytest.mark.swarm(slo={{"draft_acceptance": ">= 0.5"}}, **ITEM)
def test_drafted(swarm):
    swarm.run()

@pytest.mark.swarm(slo={{"draft_acceptance": "> 1"}}, **ITEM)
def test_more_than_drafted(swarm):
    swarm.run()

@pytest.mark.swarm(server=Server.llamacpp(), max_tokens=24, rounds=1)
def test_plain(swarm):
    swarm.run()
"""


@pytest.mark.functional
def test_a_draft_models_acceptance_is_read_from_llamacpps_timings_and_held_to_its_limit(
    pytester: pytest.Pytester, tagged: str
) -> None:
    """Gemma 3 270M drafting for itself, greedy: llama.cpp's `timings` count the drafted and accepted tokens of each
    request, and most drafts are kept (the same model proposes what it would have chosen). A limit past 1 fails
    naming the figure; a server that does not speculate has no acceptance, not 0."""
    pytester.makepyfile(test_spec=SPECULATIVE.format(draft=str(embedded_gguf())))
    result = pytester.runpytest_subprocess("-v", "--swarm-json=figures.json", "--swarm-hardware=testbox")
    result.assert_outcomes(passed=2, failed=1)
    items = {
        t["nodeid"].rsplit("::", 1)[-1]: t for t in json.loads((pytester.path / "figures.json").read_text())["tests"]
    }
    drafted = items["test_drafted"]["figures"]["draft_acceptance"]
    assert drafted is not None and 0.5 <= drafted <= 1.0, drafted
    assert items["test_plain"]["figures"]["draft_acceptance"] is None
    result.stdout.fnmatch_lines(["*hard limit broken: draft_acceptance = *, limit > 1*"])
    assert servers_left(tagged) == []


LENGTHS = """
import pytest
from pytest_swarm import Server

ITEM = dict(server=Server.llamacpp(slots=2), concurrency=2, rounds=1, warmup=False)

@pytest.mark.swarm(prompt_tokens=512, output_tokens=8, **ITEM)
def test_fixed(swarm):
    swarm.run()

@pytest.mark.swarm(prompt_tokens={"mean": 256, "stdev": 64}, output_tokens=(4, 12), prompts_per_agent=6, **ITEM)
def test_drawn(swarm):
    swarm.run()
"""

COUNTED = """
import json

def pytest_swarm_figures(item, figures, rounds):
    with open("counted.jsonl", "a") as out:
        for round_ in rounds:
            for r in round_.requests:
                prompt_n = (r.server_clock.prompt_n if r.server_clock is not None else None)
                row = [item.name, r.asked.prompt_tokens, r.prompt_tokens, prompt_n, r.asked.output_tokens, r.output_tokens]
                out.write(json.dumps(row) + "\\n")
    return {}
"""


@pytest.mark.functional
def test_prompts_and_answers_are_the_lengths_asked_in_the_servers_own_count(
    pytester: pytest.Pytester, tagged: str
) -> None:
    """Gemma's tokenizer, asked through llama.cpp's POST /tokenize: each prompt built to 512 tokens, or to a drawn
    length, is counted so by the server (usage.prompt_tokens, its BOS one more), and each answer is its drawn length."""
    pytester.makepyfile(test_lengths=LENGTHS, conftest=COUNTED)
    result = pytester.runpytest_subprocess("-v", "--swarm-json=figures.json", "--swarm-hardware=testbox")
    result.assert_outcomes(passed=2)
    rows = [json.loads(line) for line in (pytester.path / "counted.jsonl").read_text().splitlines()]
    fixed = [row for row in rows if row[0].startswith("test_fixed")]
    drawn = [row for row in rows if row[0].startswith("test_drawn")]
    assert len(fixed) == 2 and len(drawn) == 12, rows
    assert all(asked == 512 and abs(counted - asked - 1) <= 1 for _, asked, counted, *_ in fixed), fixed
    assert all(abs(counted - asked - 1) <= 1 for _, asked, counted, *_ in drawn), drawn
    assert all(got == asked for *_, asked, got in rows), rows
    figures = {
        t["nodeid"].rsplit("::", 1)[-1]: t["figures"]
        for t in json.loads((pytester.path / "figures.json").read_text())["tests"]
    }
    assert all(f["prompt_size_misses"] == 0 for f in figures.values()), figures
    print("\n".join(json.dumps(row) for row in rows))
    assert servers_left(tagged) == []
