"""The nightly workflow of examples/ (a GitHub Actions job for a self-hosted GPU runner): a valid workflow, running
the plugin's own options."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
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
