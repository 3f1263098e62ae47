"""The nightly workflow of examples/ (a GitHub Actions job for a self-hosted GPU runner): a valid workflow, running
the plugin's own options."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from pytest_swarm.settings import _COMMAND_LINE_ONLY, _FLAGS, _VALUED

WORKFLOW = Path(__file__).resolve().parent.parent / "examples" / "nightly-gpu.yml"


def test_the_nightly_workflow_validates_against_githubs_workflow_schema() -> None:
    """check-jsonschema ships the schema GitHub's workflows follow (SchemaStore's github-workflow.json)."""
    found = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    done = subprocess.run(
        [found, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_nightly_workflow_runs_only_options_the_plugin_has() -> None:
    """Every --swarm-* option the workflow passes is one the plugin registers: a renamed option fails here, not on a
    runner at night."""
    known = {option[0] for option in (*_VALUED, *_FLAGS, *_COMMAND_LINE_ONLY)}
    used = set(re.findall(r"--swarm-[a-z-]+", WORKFLOW.read_text()))
    assert used, "the workflow runs pytest with the plugin's options"
    assert used <= known, sorted(used - known)


def test_the_nightly_workflow_installs_the_extras_its_run_needs() -> None:
    """The extras it names exist, and cover what the run uses: PostgreSQL history needs psycopg (`postgres`), and the
    stored baselines' default canary is the embedded llama.cpp (`embedded`); without them the night's run stops."""
    text = WORKFLOW.read_text()
    extras = {e for found in re.findall(r"pytest-llm-swarm\[([\w,]+)\]", text) for e in found.split(",")}
    declared = set(
        tomllib.loads((WORKFLOW.parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    assert extras and extras <= declared, sorted(extras - declared)
    assert "postgres" in extras or "postgresql://" not in text
    assert "embedded" in extras or "--swarm-update-baselines" not in text
