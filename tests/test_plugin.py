"""Plugin behaviour through pytester: marker registration, validation errors, ids, ordering.

These need no server: they stop at collection or at an item's setup.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_swarm import testing
from pytest_swarm.settings import read_settings

PRELOADED = testing.PRELOADED
"""The measuring path loaded before pytester's in-process runs, which drop what they import (numpy loads once)."""


def test_marker_is_registered_for_strict_markers(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.swarm(server=Server.llamacpp(), concurrency=*"])
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.swarm(concurrency=2)
        def test_a(swarm):
            pass
        """
    )
    result = pytester.runpytest("--strict-markers", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*test_a*"])
    assert result.ret == 0


def test_a_list_of_concurrencies_gives_ids_c1_c2(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.swarm(concurrency=[4, 1, 2])
        def test_sweep(swarm):
            pass
        @pytest.mark.swarm(concurrency=3)
        def test_single(swarm, swarm_level):
            assert swarm_level == 3
        """
    )
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["*::test_sweep[[]c1[]]", "*::test_sweep[[]c2[]]", "*::test_sweep[[]c4[]]", "*::test_single"]
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("concurrency='4'", "argument concurrency='4': expected a positive int or a non-empty list*"),
        ("concurrency=[1, 1]", "argument concurrency=[[]1, 1[]]: expected*distinct*"),
        ("top_p=1.5", "argument top_p=1.5: expected a number in (0, 1]"),
        ("rounds=0", "argument rounds=0: expected a positive int"),
        ("server='vllm'", "argument server='vllm': expected a server spec*"),
        ("conccurency=4", "unknown argument 'conccurency'; did you mean 'concurrency'?"),
        (
            "zzz=4",
            "unknown argument 'zzz'; known: allow_failures, api, arrival, bisect, bisect_direction, boots, cache, *",
        ),
        ("max_tokens=None, pinned=True", "pinned=True needs max_tokens*"),
        ("workers=[1, 2]", "argument workers: needs mode='process' (one server per worker)"),
        (
            "mode='process', concurrency=[1, 2]",
            "argument concurrency: in mode='process' it is the agents per worker, one int*",
        ),
        ("mode='threads'", "argument mode='threads': expected 'request' (agents against one server) or 'process'*"),
        (
            "mode='process', interactive={'ttft.p95': '2'}",
            "argument interactive=*: expected a dict of per-round figure -> limit*",
        ),
    ],
)
def test_a_bad_marker_argument_fails_its_item_naming_it_and_the_test(
    pytester: pytest.Pytester, arguments: str, message: str
) -> None:
    pytester.makepyfile(
        test_bad=f"""
        import pytest
        @pytest.mark.swarm({arguments})
        def test_broken(swarm):
            pass
        """
    )
    result = pytester.runpytest("-q")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*test_bad.py::test_broken: @pytest.mark.swarm: {message}"])


def test_every_bad_marker_of_a_file_is_reported_on_its_own_item_and_the_good_items_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_mixed="""
        import pytest
        @pytest.mark.swarm(concurrency=0)
        def test_one(swarm):
            pass
        @pytest.mark.swarm(rounds=-1, top_p=2)
        def test_two(swarm):
            pass
        @pytest.mark.swarm(concurrency=[1, 2], temprature=0.5)
        def test_three(swarm):
            pass
        @pytest.mark.swarm(api="grpc")
        def test_four(swarm):
            pass
        @pytest.mark.swarm(mode="swarm")
        def test_five(swarm):
            pass
        def test_other():
            pass
        """
    )
    result = pytester.runpytest("-q")
    result.assert_outcomes(passed=1, errors=5)
    result.stdout.fnmatch_lines_random(
        [
            "*test_one: @pytest.mark.swarm: argument concurrency=0*",
            "*test_two: @pytest.mark.swarm: argument rounds=-1: expected a positive int; argument top_p=2: expected*",
            "*test_three: @pytest.mark.swarm: unknown argument 'temprature'; did you mean 'temperature'?",
            "*test_four: @pytest.mark.swarm: argument api='grpc'*",
            "*test_five: @pytest.mark.swarm: argument mode='swarm'*",
        ]
    )
    selected = pytester.runpytest("-q", "test_mixed.py::test_other")
    selected.assert_outcomes(passed=1)


def test_a_bad_reference_or_expect_fails_its_own_item_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_ab="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(reference="Server.llamacpp(slots=1)")
        def test_reference_is_a_string(swarm):
            pass
        @pytest.mark.swarm(reference=Server.llamacpp(), expect={"effective_tps": "1.3x"})
        def test_expect_is_not_a_ratio(swarm):
            pass
        @pytest.mark.swarm(expect={"effective_tps": ">= 1.3"})
        def test_expect_without_reference(swarm):
            pass
        def test_other():
            pass
        """
    )
    result = pytester.runpytest("-q")
    result.assert_outcomes(passed=1, errors=3)
    result.stdout.fnmatch_lines_random(
        [
            "*test_reference_is_a_string: @pytest.mark.swarm: argument reference='Server.llamacpp(slots=1)': expected a server spec*",
            "*test_expect_is_not_a_ratio: @pytest.mark.swarm: argument expect={'effective_tps': '1.3x'}: expected a dict of per-round "
            "figure -> expected ratio server/reference*",
            "*test_expect_without_reference: @pytest.mark.swarm: argument expect: needs reference=*",
        ]
    )


def test_a_prompt_file_that_does_not_exist_fails_at_setup_before_any_server_boots(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_prompts="""
        import pytest
        from pytest_swarm import Server
        @pytest.mark.swarm(server=Server.llamacpp(model="/nonexistent/model.gguf"), prompts="missing.jsonl")
        def test_reads(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest("-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_reads: @pytest.mark.swarm: prompt file */missing.jsonl does not exist"])
    assert "model.gguf" not in result.stdout.str()  # the server was never asked for


def test_marker_without_the_fixture_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.swarm(concurrency=2)
        def test_forgot():
            pass
        """
    )
    result = pytester.runpytest("-q")
    result.stdout.fnmatch_lines(["*::test_forgot: marked @pytest.mark.swarm but does not take the `swarm` fixture"])
    result.assert_outcomes(errors=1)


def test_fixture_without_the_marker_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_unmarked(swarm):
            pass
        """
    )
    result = pytester.runpytest("-q")
    result.stdout.fnmatch_lines(["*::test_unmarked: the swarm fixture needs @pytest.mark.swarm(...) on the test*"])
    assert result.ret != 0


def test_a_list_of_workers_gives_ids_w1_w2(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.swarm(mode="process", workers=[4, 1])
        def test_workers(swarm):
            pass
        """
    )
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["*::test_workers[[]w1[]]", "*::test_workers[[]w4[]]"])


def test_items_are_grouped_so_each_server_boots_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from pytest_swarm import Server
        A = Server.llamacpp(slots=1)
        B = Server.llamacpp(slots=4)
        def test_plain():
            pass
        @pytest.mark.swarm(server=A, concurrency=[1, 2])
        def test_a1(swarm):
            pass
        @pytest.mark.swarm(server=B)
        def test_b(swarm):
            pass
        @pytest.mark.swarm(server=Server.llamacpp(slots=1))
        def test_a2(swarm):
            pass
        """
    )
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["*::test_plain", "*::test_a1[[]c1[]]", "*::test_a1[[]c2[]]", "*::test_a2", "*::test_b"]
    )


def test_options_are_listed_with_their_ini_names(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "*--swarm-json=JSON*write every swarm item's figures*",
            "*--swarm-llama-server=LLAMA_SERVER*",
            "*swarm_boot_timeout (string)*",
        ]
    )


def test_paths_given_with_a_tilde_or_a_variable_are_expanded_and_a_name_on_the_path_left_alone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shell expands no `~` after `=`, and an ini file nothing: `--swarm-vllm=~/venv/bin/vllm` reaches pytest as
    written."""
    monkeypatch.setenv("SWARM_OUT", "/tmp/swarm-out")
    pytester.makeini("[pytest]\nswarm_ollama = ~/bin/ollama\nswarm_baseline_dir = $SWARM_OUT/baselines\n")
    config = pytester.parseconfig(
        "--swarm-vllm=~/venv/bin/vllm", "--swarm-llama-server=./llama-server", "--swarm-json=$SWARM_OUT/run.json"
    )
    settings = read_settings(config)
    assert settings.launch.vllm == str(Path.home() / "venv" / "bin" / "vllm")
    assert settings.launch.ollama == str(Path.home() / "bin" / "ollama")
    assert settings.launch.llama_server == "./llama-server", "a path from here, not a name to look up on the PATH"
    assert settings.reports.json == Path("/tmp/swarm-out/run.json")
    assert settings.baseline_dir == Path("/tmp/swarm-out/baselines")


def test_the_pytest11_entry_point_named_swarm_loads_the_plugin(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Users install the distribution and run pytest, naming nothing: the entry point brings the marker, and
    `-p no:swarm` is the name that turns it off."""
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    monkeypatch.delenv("PYTEST_PLUGINS")
    loaded = pytester.runpytest_subprocess("--markers")
    loaded.stdout.fnmatch_lines(["@pytest.mark.swarm(*"])
    blocked = pytester.runpytest_subprocess("--markers", "-p", "no:swarm")
    assert "@pytest.mark.swarm(" not in blocked.stdout.str()
    blocked.stdout.fnmatch_lines(["@pytest.mark.skip(*"])


def test_importing_the_plugin_loads_nothing_heavy(pytester: pytest.Pytester) -> None:
    """Every pytest run imports the plugin; the engines, aiohttp and numpy must wait for a swarm item."""
    pytester.makepyfile(
        """
        import sys
        def test_modules():
            heavy = {"aiohttp", "numpy", "scipy", "httpx", "xllamacpp", "pynvml", "matplotlib"} & set(sys.modules)
            assert not heavy, heavy
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:pytester")
    result.assert_outcomes(passed=1)


PICKED = """
import pytest
from pytest_swarm import Server

ROUTED = Server.pick({{"gpu-*": Server.llamacpp(slots=4), "{pattern}": Server.llamacpp(slots=2)}})

@pytest.mark.swarm(server=ROUTED, concurrency=[1, 2])
def test_routed(swarm):
    assert swarm.config.server == Server.llamacpp(slots=2)
"""


def test_pick_resolves_the_server_from_the_hardware_profile_at_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_routed=PICKED.format(pattern="test*"))
    # In a subprocess: a collected swarm item starts the session, whose numpy cannot load twice in one process.
    # The body checks the server it got and measures nothing, so nothing boots.
    result = pytester.runpytest("-v", "--swarm-hardware=testbox", "--swarm-history=off")
    result.stdout.fnmatch_lines(
        ["test_routed.py::test_routed[[]c1[]] PASSED*", "test_routed.py::test_routed[[]c2[]] PASSED*"]
    )
    result.assert_outcomes(
        passed=2
    )  # a wrong pick fails the body's assert (seen with --swarm-hardware=gpu-h100: 2 failed)


def test_pick_with_no_pattern_for_this_hardware_skips_naming_the_profile_or_fails_when_engines_are_required(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_routed=PICKED.format(pattern="rtx3090"))
    result = pytester.runpytest("-q", "-rs", "--swarm-hardware=testbox")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]2[]]*Server.pick has no server for hardware profile 'testbox' (patterns: 'gpu-*', 'rtx3090')"]
    )
    required = pytester.runpytest("-q", "--swarm-hardware=testbox", "--swarm-require-engines")
    required.assert_outcomes(errors=2)
    required.stdout.fnmatch_lines(["*no server for hardware profile 'testbox'*--swarm-require-engines*"])


def test_under_xdist_a_swarm_item_is_refused_naming_xdist_and_other_tests_still_run(pytester: pytest.Pytester) -> None:
    """Two swarm items measuring at once on one machine would each read the other's load as their server's."""
    pytester.makepyfile(
        test_mixed="""
        import pytest

        @pytest.mark.swarm(concurrency=[1, 2], max_tokens=8, rounds=1)
        def test_sweep(swarm):
            swarm.run()

        def test_plain():
            assert True
        """
    )
    result = pytester.runpytest_subprocess("-n", "1", "-p", "xdist", "--swarm-hardware=testbox", "--swarm-history=off")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*test_sweep?c1?: pytest-xdist runs tests in several processes at once*-p no:xdist*"])


STORED = """
import sys

import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.command([sys.executable, "-c", "pass", "{port}"]), max_tokens=4)
def test_stored(swarm):
    swarm.run()
"""


def test_a_missing_canary_engine_skips_naming_the_canary_or_fails_when_engines_are_required(
    pytester: pytest.Pytester,
) -> None:
    """The default canary (the embedded llama.cpp) cannot start here: the item says so before anything boots, as for a
    missing server engine, instead of failing at the canary's boot."""
    pytester.makepyfile(test_stored=STORED)
    args = ("--swarm-hardware=testbox", "--swarm-history=off", "--swarm-update-baselines")
    nowhere = "--swarm-llama-server=/nonexistent/llama-server"
    said = "*canary: llama-server executable '/nonexistent/llama-server' not found (--swarm-llama-server)*canary=False*"
    result = pytester.runpytest("-q", "-rs", *args, nowhere)  # numpy preloaded (pytest_swarm.testing), so in-process
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED*{said}"])
    required = pytester.runpytest("-q", *args, nowhere, "--swarm-require-engines")
    required.assert_outcomes(failed=1)
    required.stdout.fnmatch_lines([f"{said}--swarm-require-engines: a missing engine fails the item*"])
