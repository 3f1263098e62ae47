"""The reference pages' tables, generated from the one declaration of each marker argument, option and figure.

marker.md, options.md and concepts.md hold their tables in git, between `<!-- swarm:NAME -->` and
`<!-- /swarm:NAME -->`, so they read the same on the repository's web view as on the site. They are written from
pytest_swarm.marker.table.ARGUMENTS, pytest_swarm.settings.options() and pytest_swarm.figures.registry.FIGURES:

    python docs/hooks/reference.py            # rewrite both pages' tables
    python docs/hooks/reference.py --check    # exit 1 when a page's table is not what the code declares

As an mkdocs hook it fails the build on a stale table (tests/test_docs.py checks the same).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1]
MARKER, OPTIONS, FIGURES = "marker-arguments", "options", "figures"
PAGES = {MARKER: DOCS / "marker.md", OPTIONS: DOCS / "options.md", FIGURES: DOCS / "concepts.md"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def marker_table() -> str:
    from pytest_swarm.marker.arguments import Derived
    from pytest_swarm.marker.table import ARGUMENTS

    rows = ["| argument | default | takes | what it does |", "| --- | --- | --- | --- |"]
    for name, argument in ARGUMENTS.items():
        default = argument.default.says if isinstance(argument.default, Derived) else f"`{argument.default!r}`"
        rows.append(f"| `{name}` | {_cell(default)} | {_cell(argument.expects)} | {_cell(argument.help)} |")
    return "\n".join(rows)


def _derived_defaults() -> dict[str, str]:
    """The options whose default the code derives rather than declares: what a run without them uses."""
    from pytest_swarm.settings import HISTORY_FILE, LockSettings, options

    baseline_dir = next(o.default for o in options() if o.flag == "--swarm-baseline-dir")
    return {
        "--swarm-history": f"`{baseline_dir}/{HISTORY_FILE}` (under the rootdir, beside the baselines)",
        "--swarm-lock-dir": f"`/tmp/{LockSettings().lock_dir.name}` (in the system's temporary directory: `$TMPDIR`)",
    }


def options_table() -> str:
    from pytest_swarm.settings import options

    derived = _derived_defaults()
    rows = ["| option | ini | default | what it does |", "| --- | --- | --- | --- |"]
    for option in options():
        ini = f"`{option.ini}`" if option.ini else "command line only"
        default = derived.get(option.flag) or ("unset" if option.default is None else f"`{option.default}`")
        rows.append(f"| `{option.flag}` | {ini} | {default} | {_cell(option.help)} |")
    return "\n".join(rows)


def figures_table() -> str:
    from pytest_swarm.figures.registry import FIGURES

    rows = ["| figure | facet | unit | better | scalar names | meaning |", "| --- | --- | --- | --- | --- | --- |"]
    for figure in FIGURES:
        gateable = set(figure.gated_scalars)
        names = ", ".join(f"`{n}`" + (" (gateable)" if n in gateable else "") for n in figure.scalars)
        if not figure.stored:
            names = names if figure.limitable else "JSON report only"
        elif not figure.limitable:
            names += "; not limitable"
        rows.append(
            f"| `{figure.name}` | {figure.facet} | {_cell(figure.unit)} | {figure.direction} | {names} "
            f"| {_cell(figure.doc)} |"
        )
    return "\n".join(rows)


TABLES = {MARKER: marker_table, OPTIONS: options_table, FIGURES: figures_table}


def _section(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- swarm:{name} -->\n).*?(<!-- /swarm:{name} -->)", re.S)


def with_tables(markdown: str) -> str:
    """The page with each generated section it holds rewritten from the code."""
    for name, table in TABLES.items():
        markdown = _section(name).sub(lambda m, t=table: m[1] + t() + "\n" + m[2], markdown)  # type: ignore[misc]
    return markdown


def stale() -> list[str]:
    return [
        str(page.relative_to(DOCS.parent))
        for page in PAGES.values()
        if with_tables(page.read_text()) != page.read_text()
    ]


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if with_tables(markdown) != markdown:
        raise ValueError(f"{page.file.src_path}: its generated table is stale: run python docs/hooks/reference.py")
    return markdown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say which pages are stale (exit 1 if any)")
    args = parser.parse_args()
    if args.check:
        for path in stale():
            print(f"{path}: stale: run python docs/hooks/reference.py")
        return 1 if stale() else 0
    for page in PAGES.values():
        page.write_text(with_tables(page.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
