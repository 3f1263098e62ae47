"""The workflow recipes of examples/: the nightly one (a GitHub Actions job for a self-hosted GPU runner), a valid
workflow running the plugin's own options; the release one (a tag to PyPI by trusted publishing, and a release)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from pytest_swarm.settings import _COMMAND_LINE_ONLY, _FLAGS, _VALUED

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
WORKFLOW = EXAMPLES / "nightly-gpu.yml"
RELEASE = EXAMPLES / "release.yml"


@pytest.mark.parametrize("workflow", [WORKFLOW, RELEASE], ids=lambda p: p.name)
def test_the_workflows_validate_against_githubs_workflow_schema(workflow: Path) -> None:
    """check-jsonschema ships the schema GitHub's workflows follow (SchemaStore's github-workflow.json)."""
    found = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    done = subprocess.run(
        [found, "--builtin-schema", "vendor.github-workflows", str(workflow)],
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


def test_the_release_workflow_publishes_a_tag_by_trusted_publishing_after_the_tutorial_ran_from_the_wheel() -> None:
    """A tag starts it; PyPI gets the files through its OIDC token (id-token: write, no stored token), only once the
    files are checked (twine), the tag names the version built, and the tutorial's test passed from the wheel."""
    flow = yaml.safe_load(RELEASE.read_text())
    assert flow[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as True
    jobs = flow["jobs"]
    build = "\n".join(str(step.get("run", "")) for step in jobs["build"]["steps"])
    assert "python -m build" in build and "twine check --strict dist/*" in build and "GITHUB_REF_NAME" in build
    tutorial = "\n".join(str(step.get("run", "")) for step in jobs["tutorial"]["steps"])
    name = tomllib.loads((EXAMPLES.parent / "pyproject.toml").read_text())["project"]["name"]
    assert f"{name}[embedded] @ file://" in tutorial and "examples/tutorial" in tutorial
    assert (EXAMPLES / "tutorial" / "tests" / "swarm" / "test_upgrade.py").is_file()
    publish = jobs["publish"]
    assert set(publish["needs"]) == {"build", "tutorial"}
    assert publish["permissions"] == {"id-token": "write"}
    assert [s["uses"] for s in publish["steps"]][-1] == "pypa/gh-action-pypi-publish@release/v1"
    assert all("password" not in step.get("with", {}) for step in publish["steps"]), "trusted publishing: no token"
    assert publish["environment"]["url"] == f"https://pypi.org/p/{name}"
    assert jobs["github-release"]["needs"] == "publish"
    assert "gh release create" in jobs["github-release"]["steps"][-1]["run"]
