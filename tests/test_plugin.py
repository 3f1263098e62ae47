"""Plugin behaviour through pytester: marker registration, validation errors, ids, ordering.

These need no server: they stop at collection.
"""

from __future__ import annotations

import pytest


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
        ("conccurency=4", "unknown argument 'conccurency'; known: api, boots, concurrency, *"),
        ("max_tokens=None, pinned=True", "pinned=True needs max_tokens*"),
        ("workers=[1, 2]", "argument workers: needs mode='process' (one server per worker)"),
        ("mode='process', concurrency=[1, 2]", "argument concurrency: in mode='process' it is the agents per worker, one int*"),
        ("mode='threads'", "argument mode='threads': expected 'request' (agents against one server) or 'process'*"),
        ("mode='process', interactive={'ttft.p95': '2'}", "argument interactive=*: expected a dict of per-round figure -> limit*"),
    ],
)
def test_a_bad_marker_argument_is_a_collection_error_naming_it_and_the_test(
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
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*test_bad.py::test_broken: @pytest.mark.swarm: {message}"])


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
    assert result.ret == pytest.ExitCode.INTERRUPTED


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
        ["*--swarm-json=JSON*write every swarm item's figures*", "*--swarm-llama-server=LLAMA_SERVER*", "*swarm_boot_timeout (string)*"]
    )


def test_importing_the_plugin_loads_nothing_heavy(pytester: pytest.Pytester) -> None:
    """pytest imports the plugin in every run; the engines, aiohttp and numpy must wait for a swarm item."""
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
