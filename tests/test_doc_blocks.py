"""Every Python block of the README, the tutorial and the guides runs as a reader would paste it.

Each block is introduced by an HTML comment (invisible on the rendered page) saying what it is:

- `<!-- file: tests/swarm/test_x.py -->`: the block is that file of the reader's project, or, where the page showed
  the file before, the part the page says to add to it (the prose before such a block names the file). The page's
  files are written into a project of their own and collected by pytest with the plugin, and each item's
  `@pytest.mark.swarm` is parsed as the plugin parses it before a run: an unknown argument, a bad value or a
  decorator with no function fails here, not in a reader's terminal. A module that is not a test (an engine) is
  imported. The files a marker names (a trace, a dataset) are put beside them, from DATA.
- `<!-- excerpt: examples/x.py -->`: lines of a file of this repository, in its order; that file is run by CI
  (`examples/`, the tutorial's project from the installed wheel).
- `<!-- change: pytest_swarm/x.py -->`: a contributor's change inside the package, shown before it is made (the
  extend guide's own figure): it must compile; the package's tests check it once made.

Running the items themselves boots engines: the tutorial's test does that in CI from the wheel (.ci/run), and each
guide's shown output says when and where it was taken.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import pytest_swarm
import pytest_swarm.plugin  # the plugin's modules, before the first inner run
from pytest_swarm.core.errors import NoServerForHardware, SpecError
from pytest_swarm.marker.parse import parse_marker

# Every public name loaded here, before any inner run: an inner run restores sys.modules when it ends, and a name the
# package's lazy loader first loaded inside one would stay cached on the package from a module no longer loaded.
for _name in pytest_swarm.__all__:
    getattr(pytest_swarm, _name)

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    ROOT / "docs" / "index.md",
    ROOT / "docs" / "tutorial.md",
    *sorted((ROOT / "docs" / "guides").glob("*.md")),
]
BLOCK = re.compile(
    r"^(?:<!-- (?P<kind>file|excerpt|change): (?P<target>\S+) -->\n)?```python\n(?P<code>.*?)^```", re.S | re.M
)
TRACE = ROOT / "examples" / "traces" / "agents_small.jsonl"
DATA = {
    "traces/agents_small.jsonl": TRACE.read_text(),
    "traces/prod.jsonl": TRACE.read_text(),
    "chats.jsonl": '{"messages": [{"role": "user", "content": "Name a prime."}, '
    '{"role": "assistant", "content": "7"}, {"role": "user", "content": "Another?"}]}\n',
}
"""The files the guides' markers name, relative to the reader's rootdir: the sample trace stands in for theirs."""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    kind: str | None
    target: str | None
    code: str
    before: str
    """The page's text between the previous Python block and this one: where a fragment says what it joins."""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found, end = [], 0
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, match["kind"], match["target"], match["code"], text[end : match.start()]))
        end = match.end()
    return found


def project_files(page: Path) -> dict[str, str]:
    """The page's files as a reader ends with them: each `file:` block, the later ones appended to the earlier."""
    files: dict[str, str] = {}
    for block in blocks(page):
        if block.kind == "file" and block.target is not None:
            files[block.target] = files.get(block.target, "") + ("\n\n" if block.target in files else "") + block.code
    return files


def test_every_python_block_of_the_readme_tutorial_and_guides_says_what_it_is() -> None:
    unnamed = [b.where for page in PAGES for b in blocks(page) if b.kind is None]
    assert unnamed == []
    assert sum(len(blocks(page)) for page in PAGES) >= 12


def test_a_fragment_says_which_file_it_joins() -> None:
    silent = []
    for page in PAGES:
        seen: set[str] = set()
        for block in blocks(page):
            if block.kind != "file" or block.target is None:
                continue
            if block.target in seen and Path(block.target).name not in block.before:
                silent.append(f"{block.where}: adds to {block.target} without saying so")
            seen.add(block.target)
    assert silent == []


def test_a_change_to_the_package_compiles() -> None:
    changes = [b for page in PAGES for b in blocks(page) if b.kind == "change"]
    for block in changes:
        compile(block.code, block.where, "exec")
    assert all(block.target is not None and (ROOT / block.target).is_file() for block in changes)


def test_an_excerpt_is_the_lines_of_its_file_in_order() -> None:
    wrong = []
    for page in PAGES:
        for block in blocks(page):
            if block.kind != "excerpt" or block.target is None:
                continue
            source = iter(line.strip() for line in (ROOT / block.target).read_text().splitlines())
            missing = [line for line in block.code.splitlines() if line.strip() and line.strip() not in source]
            if missing:
                wrong.append(f"{block.where}: not in {block.target} in this order: {missing[0]!r}")
    assert wrong == []


class MarkerCheck:
    """A plugin for the inner run: every collected item's swarm marker parsed as the plugin parses it."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.functions: set[str] = set()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            self.functions.add(getattr(item, "originalname", item.name))
            marker = item.get_closest_marker("swarm")
            if marker is None:
                continue
            try:
                parse_marker(marker.args, marker.kwargs, rootdir=session.config.rootpath)
            except NoServerForHardware:
                pass  # a Server.pick with no pattern for this host: the item skips, as on a reader's
            except SpecError as exc:  # every mistake a marker can hold, by item
                self.problems.append(f"{item.nodeid}: {exc}")


@pytest.mark.parametrize("page", [p for p in PAGES if project_files(p)], ids=lambda p: p.name)
def test_the_pages_files_collect_and_their_markers_parse(
    page: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = project_files(page)
    pytester.makefile(".toml", pyproject="[tool.pytest.ini_options]\n")
    for name, text in {**DATA, **files}.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    modules = [name for name in files if name.endswith(".py") and not Path(name).name.startswith(("test_", "conftest"))]
    pytester.syspathinsert()
    for name in modules:
        monkeypatch.delitem(__import__("sys").modules, Path(name).stem, raising=False)
        importlib.import_module(Path(name).stem)
    check = MarkerCheck()
    run = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider", plugins=[check])
    defined = {m for name, text in files.items() for m in re.findall(r"^def (test_\w+)", text, re.M)}
    assert run.ret == (0 if defined else pytest.ExitCode.NO_TESTS_COLLECTED), run.stdout.str()
    assert check.problems == []
    assert check.functions == defined


def test_the_extend_guides_engine_pins_its_server_where_its_spec_says() -> None:
    """A spec given `cpus=` is labelled pinned; its launcher passes them to start_on_free_port, so it is pinned."""
    namespace: dict[str, object] = {}
    exec(project_files(ROOT / "docs" / "guides" / "extend.md")["swarm_echo.py"], namespace)
    spec = namespace["spec"](cpus=[1])  # type: ignore[operator]
    assert spec.cpus == (1,) and "cpus=1" in spec.label
    assert "cpus=spec.cpus" in project_files(ROOT / "docs" / "guides" / "extend.md")["swarm_echo.py"]


def test_a_decorator_with_no_function_fails_the_check(pytester: pytest.Pytester) -> None:
    """The check is not vacuous: the replay guide's old fragment (a marker and nothing under it) does not compile,
    and a marker argument the plugin does not know is reported."""
    pytester.makefile(".toml", pyproject="[tool.pytest.ini_options]\n")
    pytester.makepyfile(
        test_bad="import pytest\nfrom pytest_swarm import Server\n\n"
        "@pytest.mark.swarm(server=Server.llamacpp(), concurrency=4)\n"
    )
    assert pytester.runpytest_inprocess("--collect-only", "-q").ret == pytest.ExitCode.INTERRUPTED
    pytester.makepyfile(
        test_bad="import pytest\nfrom pytest_swarm import Server\n\n"
        "@pytest.mark.swarm(server=Server.llamacpp(), concurrency=4, trace_windw=(0, 60))\n"
        "def test_x(swarm):\n    swarm.run()\n"
    )
    check = MarkerCheck()
    assert pytester.runpytest_inprocess("--collect-only", "-q", plugins=[check]).ret == 0
    assert len(check.problems) == 1 and "trace_windw" in check.problems[0]


def test_the_tutorials_files_are_the_project_ci_runs_from_the_wheel() -> None:
    """docs/tutorial.md shows the files of examples/tutorial/ as they are: CI copies that project out of the
    repository and runs it from the installed wheel (.ci/run), so what the page shows is what passed."""
    project = ROOT / "examples" / "tutorial"
    shown = {name: text.strip() for name, text in project_files(ROOT / "docs" / "tutorial.md").items()}
    files = {str(p.relative_to(project)): p.read_text().strip() for p in sorted(project.rglob("test_*.py"))}
    assert shown == files
    assert "[tool.pytest.ini_options]" in (project / "pyproject.toml").read_text()


def test_the_extend_guides_tests_on_the_fake_box_pass_as_a_reader_runs_them(pytester: pytest.Pytester) -> None:
    """The guide's conftest (a figure and a report section of the reader's) and its pytester tests on the fake box,
    written as the page shows them and run by pytest: both pass."""
    files = project_files(ROOT / "docs" / "guides" / "extend.md")
    for name in ("conftest.py", "tests/test_team_plugin.py"):
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[name])
    result = pytester.runpytest("-p", "no:cacheprovider", "tests/test_team_plugin.py")
    result.assert_outcomes(passed=2)
