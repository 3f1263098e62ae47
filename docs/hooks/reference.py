"""mkdocs hook: the reference pages' tables, generated from the one declaration of each marker argument, option and
figure.

marker.md, options.md and concepts.md hold a placeholder comment; this fills it at build time from
pytest_swarm.marker.table.ARGUMENTS, pytest_swarm.settings.options() and pytest_swarm.figures.registry.FIGURES, so the
pages cannot drift from the code (tests/test_docs.py checks every name appears).
"""

from __future__ import annotations

from typing import Any

MARKER_PLACEHOLDER = "<!-- swarm:marker-arguments -->"
OPTIONS_PLACEHOLDER = "<!-- swarm:options -->"
FIGURES_PLACEHOLDER = "<!-- swarm:figures -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def marker_table() -> str:
    from pytest_swarm.marker.arguments import Derived
    from pytest_swarm.marker.table import ARGUMENTS

    rows = ["| argument | default | takes | what it does |", "| --- | --- | --- | --- |"]
    for name, argument in ARGUMENTS.items():
        default = argument.default.says if isinstance(argument.default, Derived) else f"`{argument.default!r}`"
        rows.append(f"| `{name}` | {_cell(default)} | {_cell(argument.expects)} | {_cell(argument.help)} |")
    return "\n".join(rows)


def options_table() -> str:
    from pytest_swarm.settings import options

    rows = ["| option | ini | default | what it does |", "| --- | --- | --- | --- |"]
    for option in options():
        ini = f"`{option.ini}`" if option.ini else "command line only"
        default = "none" if option.default is None else f"`{option.default}`"
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


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER_PLACEHOLDER in markdown:
        markdown = markdown.replace(MARKER_PLACEHOLDER, marker_table())
    if OPTIONS_PLACEHOLDER in markdown:
        markdown = markdown.replace(OPTIONS_PLACEHOLDER, options_table())
    if FIGURES_PLACEHOLDER in markdown:
        markdown = markdown.replace(FIGURES_PLACEHOLDER, figures_table())
    return markdown
