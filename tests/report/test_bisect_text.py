"""The culprit's line: what two servers' specs and boots differ in, as a reader can take it in."""

from __future__ import annotations

from pytest_swarm.report.bisect_text import changed_line

BUILDS = "/root/.cache/pytest-swarm/builds"


def test_two_builds_in_one_cache_show_the_folder_that_tells_them_apart() -> None:
    old = f"xllamacpp 2026.8.10229, installed from the package index into {BUILDS}/xllamacpp-2026.8.10229"
    new = f"xllamacpp 2026.8.10566, installed from the package index into {BUILDS}/xllamacpp-2026.8.10566"
    assert changed_line("build", old, new) == (
        "build xllamacpp 2026.8.10229, installed from the package index into …/xllamacpp-2026.8.10229"
        " -> xllamacpp 2026.8.10566, installed from the package index into …/xllamacpp-2026.8.10566"
    )


def test_paths_that_share_no_folder_below_the_root_or_the_home_stay_whole() -> None:
    assert changed_line("executable", "/opt/a/bin/vllm", "/opt/b/bin/vllm") == (
        "executable /opt/a/bin/vllm -> /opt/b/bin/vllm"
    )
    assert changed_line("executable", "/opt/v/bin/vllm", "~/venv/bin/vllm") == (
        "executable /opt/v/bin/vllm -> ~/venv/bin/vllm"
    )
    assert changed_line("threads", "2", "1") == "threads 2 -> 1"
