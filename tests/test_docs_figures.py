"""No stale figure in the docs: every measured figure a page states has a source the reader can check.

A figure (a number with a unit of time, rate, memory, a percentage or a ratio like x0.84) in the prose of README.md or
docs/ needs, in its own paragraph or table:
- a results file in benchmarks/ that holds it (`benchmarks/gating_results.txt`: the number as the file has it, or
  its seconds as minutes, its fraction as a percentage), or
- the run it came from, named by its date and machine ("2026-11-25, 2-core EPYC"), or
- the mark `<!-- settings -->`: the numbers there are limits and defaults a user sets, not measurements.

Code (fenced or `inline`) is a setting or a command, not a claim; numbers after a comparison (< 2 s, at most 10 ms)
are thresholds. Tables generated from a results file (between `<!-- gating-table -->` markers) are checked by
test_docs.py against the file itself. A page that calls something "not run yet" fails when benchmarks/ has a result
for what it names.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_UNIT = r"(?:µs|ms|s|seconds|min|minutes|hours?|tok/s|req/s|MiB|GiB|%|x)"
_DIGITS = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"  # 26,607 is one number
_WITH_UNIT = re.compile(r"(?<![\w.,/])(" + _DIGITS + r")\s?(" + _UNIT + r")(?![\w/])")
_RATIO = re.compile(r"(?<![\w.])x(" + _DIGITS + r")\b")
_THRESHOLD = re.compile(r"(?:<|>|≤|≥|=|under|over|at most|at least|within|up to|below|above)\s*[~≈]?\s*$")
_RESULTS_FILE = re.compile(r"benchmarks/[\w./-]*results[\w.-]*\.txt")
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
_MACHINE = re.compile(r"EPYC|Xeon|H100|H200|A100|RTX|\d-core|\d cores")
_SETTINGS = "<!-- settings -->"
_GENERATED = re.compile(r"<!-- (gating-table|swarm:[\w-]+) -->.*?<!-- /\1 -->", re.S)
_NOT_RUN = re.compile(
    r"not (?:been )?(?:run|measured) yet|has not been run|never been (?:run|measured)|unmeasured", re.I
)
_NUMBER_IN_FILE = re.compile(_DIGITS)


@dataclass(frozen=True)
class Figure:
    """One figure a page states, and where."""

    page: str
    line: int
    text: str
    number: float
    decimals: int
    unit: str


@dataclass(frozen=True)
class Block:
    """A paragraph, a list item's run of lines or a table: what shares a source."""

    page: str
    line: int
    text: str


def blocks(page: str, text: str) -> Iterator[Block]:
    """The page's prose in blocks split at blank lines, without fenced code and generated tables."""
    text = _GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    current: list[str] = []
    start, fenced = 0, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.strip():
            if not current:
                start = number
            current.append(line)
        elif current:
            yield Block(page, start, "\n".join(current))
            current = []
    if current:
        yield Block(page, start, "\n".join(current))


def figures(block: Block) -> list[Figure]:
    """The measured-looking figures in a block: numbers with a unit or ratios, outside code and thresholds."""
    prose = re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group(0)), block.text)  # spans may wrap
    found: list[Figure] = []
    for match, unit in [(m, m.group(2)) for m in _WITH_UNIT.finditer(prose)] + [
        (m, "x") for m in _RATIO.finditer(prose)
    ]:
        if _THRESHOLD.search(prose[: match.start()].rstrip()[-14:]):
            continue
        digits = match.group(1).replace(",", "")
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        line = block.line + prose[: match.start()].count("\n")
        found.append(Figure(block.page, line, match.group(0), float(digits), decimals, unit))
    return found


def held(figure: Figure, numbers: frozenset[str]) -> bool:
    """Whether a results file holds the figure: its digits as written, or its seconds as minutes, its fraction as a
    percentage, its seconds as milli- or microseconds, rounded as the page rounds them."""
    digits = f"{figure.number:.{figure.decimals}f}"
    if digits in numbers:
        return True
    scales = {"min": [1 / 60], "minutes": [1 / 60], "%": [100.0], "ms": [1000.0], "µs": [1e6, 1000.0]}.get(
        figure.unit, []
    )
    return any(f"{abs(float(n)) * c:.{figure.decimals}f}" == digits for c in scales for n in numbers)


def _numbers(path: Path) -> frozenset[str]:
    return _numbers_in(path.read_text(errors="replace"))


@functools.cache
def _numbers_in(text: str) -> frozenset[str]:
    """Once a text: each planted page is checked against the same results files."""
    return frozenset(n.replace(",", "") for n in _NUMBER_IN_FILE.findall(text))


def unsourced(block: Block, root: Path) -> list[str]:
    """What is wrong with the block's figures: each one no source named in the block holds."""
    stated = figures(block)
    named_run = _DATE.search(block.text) and _MACHINE.search(block.text)
    if not stated or _SETTINGS in block.text or named_run:
        return []
    cited = sorted(set(_RESULTS_FILE.findall(block.text)))
    missing = [c for c in cited if not (root / c).is_file()]
    if missing:
        return [f"{block.page}:{block.line}: cites {', '.join(missing)}, which does not exist"]
    numbers: frozenset[str] = frozenset().union(*(_numbers(root / c) for c in cited))
    problems = []
    for figure in stated:
        if not cited:
            problems.append(
                f"{figure.page}:{figure.line}: '{figure.text}' has no source: name the results file in benchmarks/ "
                "that holds it or the run (date and machine), or mark limits and defaults <!-- settings -->"
            )
        elif not held(figure, numbers):
            problems.append(f"{figure.page}:{figure.line}: '{figure.text}' is not in {', '.join(cited)}")
    return problems


def stale_not_run(block: Block, root: Path) -> list[str]:
    """A "not run yet" about something benchmarks/ has a result for, or about nothing named."""
    problems = []
    for match in _NOT_RUN.finditer(block.text):
        line = block.line + block.text[: match.start()].count("\n")
        named = [Path(n).stem for n in re.findall(r"`([\w./-]+\.py)[^`]*`", block.text)]
        if not named:
            problems.append(f"{block.page}:{line}: '{match.group(0)}' names no example or benchmark (`file.py`)")
            continue
        results = " ".join(p.read_text(errors="replace") for p in sorted((root / "benchmarks").glob("*results*.txt")))
        problems += [
            f"{block.page}:{line}: '{match.group(0)}', but benchmarks/ has a result for {n}"
            for n in named
            if n in results
        ]
    return problems


def check(root: Path) -> list[str]:
    """Every problem in README.md and the docs pages under `root`."""
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    problems: list[str] = []
    for page in pages:
        for block in blocks(str(page.relative_to(root)), page.read_text()):
            problems += unsourced(block, root) + stale_not_run(block, root)
    return problems


def test_every_figure_in_the_docs_has_a_source() -> None:
    problems = check(ROOT)
    assert problems == [], "\n".join(problems)


@pytest.fixture
def docs_tree(tmp_path: Path) -> Path:
    """A copy of the README, the docs and the results files, to plant claims in."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text())
    for page in (ROOT / "docs").rglob("*.md"):
        target = tmp_path / page.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page.read_text())
    for results in (ROOT / "benchmarks").glob("*results*.txt"):
        (tmp_path / "benchmarks" / results.name).write_text(results.read_text())
    return tmp_path


@pytest.mark.parametrize(
    ("claim", "said"),
    [
        ("The main job takes about 10 minutes on 2 cores.", "'10 minutes' has no source"),
        (
            "Deciding took 41.7 min on the EPYC (`benchmarks/gating_results.txt`).",
            "not in benchmarks/gating_results.txt",
        ),
        ("See benchmarks/nothing_results.txt: 3.1 s.", "benchmarks/nothing_results.txt, which does not exist"),
        ("Under the paired search `harness_overhead.py` has not been run yet.", "benchmarks/ has a result for"),
        ("This has not been run yet.", "names no example or benchmark"),
    ],
)
def test_a_planted_stale_claim_fails(docs_tree: Path, claim: str, said: str) -> None:
    page = docs_tree / "docs" / "index.md"
    before = check(docs_tree)
    page.write_text(page.read_text() + f"\n\n{claim}\n")
    problems = [p for p in check(docs_tree) if p not in before]
    assert len(problems) == 1 and said in problems[0] and problems[0].startswith("docs/index.md:"), problems


@pytest.mark.parametrize(
    "claim",
    [
        "Measured 2026-11-25 on a 2-core EPYC: the main job took 21 minutes.",
        "The gate decided after 472.8 s, that is 7.9 min (benchmarks/gating_results.txt).",
        "Each round lasts 30 s and each warm-up 5 s. <!-- settings -->",
        "Interactive means p95 TTFT < 2 s and a median above 20 tok/s.",
        "Set `max_seconds=420` for a 7-minute budget at most.",
    ],
)
def test_a_sourced_figure_passes(docs_tree: Path, claim: str) -> None:
    page = docs_tree / "docs" / "index.md"
    before = check(docs_tree)
    page.write_text(page.read_text() + f"\n\n{claim}\n")
    assert check(docs_tree) == before
