"""The README a newcomer reads in two minutes, and the docs site's reference pages generated from the code."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from pytest_swarm.figures.registry import FIGURES
from pytest_swarm.marker.table import ARGUMENTS
from pytest_swarm.settings import options

ROOT = Path(__file__).resolve().parents[1]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference_hook", ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_marker_argument_and_option_is_in_the_committed_reference_pages() -> None:
    """docs/marker.md, docs/options.md and docs/concepts.md hold their tables in git (the repository's web view shows
    them), as the code declares them now: `python docs/hooks/reference.py` rewrites them."""
    hook = _hook()
    assert hook.stale() == [], "run python docs/hooks/reference.py"
    marker = (ROOT / "docs" / "marker.md").read_text()
    opts = (ROOT / "docs" / "options.md").read_text()
    assert [name for name in ARGUMENTS if f"| `{name}` |" not in marker] == []
    assert [o.flag for o in options() if f"| `{o.flag}` |" not in opts] == []
    assert len(options()) >= 30 and len(ARGUMENTS) >= 40


def test_the_figures_page_is_the_registry() -> None:
    """docs/concepts.md's table of figures is generated from the registry: every figure, with its unit and direction
    (held fresh with the other tables by the test above)."""
    page = (ROOT / "docs" / "concepts.md").read_text()
    rows = [f"| `{f.name}` | {f.facet} | {f.unit} | {f.direction} |" for f in FIGURES]
    assert [row for row in rows if row not in page] == []


def test_the_options_page_states_the_defaults_a_run_uses() -> None:
    """A default the code derives is shown as what a run uses, not as none: the history beside the baselines, the GPU
    lock's queues in the temporary directory."""
    import tempfile

    from pytest_swarm.settings import LockSettings

    rows = {
        line.split("|")[1].strip(" `"): line.split("|")[3]
        for line in (ROOT / "docs" / "options.md").read_text().splitlines()
        if line.startswith("| `--")
    }
    assert "`baselines/history.sqlite`" in rows["--swarm-history"]
    if tempfile.gettempdir() == "/tmp":
        assert f"`{LockSettings().lock_dir}`" in rows["--swarm-lock-dir"]
    assert "none" not in rows["--swarm-history"] and "unset" not in rows["--swarm-lock-dir"]


def test_a_stale_reference_table_is_caught() -> None:
    hook = _hook()
    page = (ROOT / "docs" / "options.md").read_text()
    stale = page.replace("| `--swarm-lock-dir` |", "| `--swarm-lock-directory` |")
    assert hook.with_tables(stale) == page != stale


def test_the_readme_fits_two_minutes_with_the_example_and_both_commands_up_front() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    head = "\n".join(lines[:60])
    assert ".venv/bin/pytest examples/" in head and ".venv/bin/pytest tests/" in head and "@pytest.mark.swarm(" in head


def test_the_readmes_links_reach_files_that_exist() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)\)", text)
    assert targets and [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()] == []


def test_ci_builds_the_docs_strictly_and_runs_the_readmes_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "mkdocs build --strict" in ci and "lint-imports" in ci
    tiers = re.findall(
        r'^\.venv/bin/pytest -m "?([^"\n]+?)"? (?:-n \d (?:--dist \w+ )?)?((?:tests/\S*)(?: tests/\S+)*)((?: --ignore(?:-glob)?=\S+)*)',
        ci,
        re.MULTILINE,
    )
    beside = {str(p.relative_to(ROOT)) for p in ROOT.glob("tests/engines/test_vllm*_real.py")}
    beside |= {"tests/test_agent_workloads.py", "tests/engines/test_transformers_real.py"}
    assert [(marker, set(paths.split()), ignored) for marker, paths, ignored in tiers] == [
        ("not e2e and not quiet", {"tests/"}, ""),
        (
            "e2e and functional",
            {"tests/"},
            ' --ignore-glob="tests/engines/test_vllm*_real.py" --ignore=tests/engines/test_transformers_real.py'
            " --ignore=tests/test_agent_workloads.py",
        ),
        ("e2e and functional", beside, ""),
        ("quiet and not e2e", {"tests/"}, ""),
        ("e2e and not functional", {"tests/"}, ""),
    ], "every test in one tier, none in two"


def test_the_gate_tables_are_the_benchmark_results_file_as_it_is() -> None:
    """The validation page's table is generated from benchmarks/gating_results.txt (`python benchmarks/gating.py
    --markdown --write docs/validation.md`), so it cannot drift from the runs."""
    spec = importlib.util.spec_from_file_location("gating", ROOT / "benchmarks" / "gating.py")
    assert spec is not None and spec.loader is not None
    gating = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gating)
    table = gating.markdown_table()
    for page in (ROOT / "docs" / "validation.md",):
        text = page.read_text()
        assert gating.with_table(text, table) == text, (
            f"{page.name}: run python benchmarks/gating.py --markdown --write"
        )


def test_the_architecture_pages_extension_api_names_exactly_what_pytest_swarm_engines_exports() -> None:
    import pytest_swarm.engines as api

    text = (ROOT / "docs" / "architecture.md").read_text()
    listed = re.search(r"\(its `__all__`: ([^)]*)\)", text)
    assert listed is not None, "architecture.md: the extension API's `__all__` list is gone"
    assert sorted(re.findall(r"`(\w+)`", listed.group(1))) == sorted(api.__all__)


def test_the_validation_pages_newcomer_runs_are_the_results_file_as_it_is() -> None:
    """Every newcomer run recorded, failed ones included: `python benchmarks/newcomer.py --markdown --write
    docs/validation.md` writes the table; a stale one fails here."""
    spec = importlib.util.spec_from_file_location("newcomer", ROOT / "benchmarks" / "newcomer.py")
    assert spec is not None and spec.loader is not None
    newcomer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(newcomer)
    page = (ROOT / "docs" / "validation.md").read_text()
    assert newcomer.with_table(page, newcomer.markdown_table()) == page, "run python benchmarks/newcomer.py --markdown"
    rows = (ROOT / "benchmarks" / "newcomer_results.txt").read_text().splitlines()
    assert page.count("| `") >= len(rows)
