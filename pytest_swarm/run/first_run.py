"""`python -m pytest_swarm run [URL]`: a first measurement from one command, before any test is written.

It writes the equivalent swarm test into a folder of its own and runs pytest on it with this plugin: the rounds, the
table, the JSON and the HTML are the plugin's, and `--write-test` keeps that file as the user's first regression test.
With a URL the test measures that running server (`Server.endpoint`), and `--against` a second one makes each level an
A/B item with the gate's verdict; without a URL, the embedded engine. Exit 0 when the run passed, 1 when an item
failed, 2 for a usage error (a malformed argument, a URL that does not answer).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pytest

from ..core.errors import BootError, SpecError
from ..settings import base_url

TEST = '''"""A swarm sweep written by `python -m pytest_swarm run`. {how}"""

import pytest

from pytest_swarm import Server, Swarm


@pytest.mark.swarm(server={server}, concurrency={levels!r}, {lengths}, {rest})
def test_first_run(swarm: Swarm) -> None:
    assert swarm.run().failures == 0
'''
FILE = "test_first_run.py"
PROG = "python -m pytest_swarm run"


def _levels(text: str) -> list[int]:
    """--concurrency 1,2,4: agents at once, each level an item of the sweep."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isascii() and part.isdigit() and int(part) >= 1 for part in parts):
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, such as 1,2,4, got {text!r}")
    return [int(part) for part in parts]


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", nargs="?", help="a running server's base URL (with or without /v1); none: the embedded")
    parser.add_argument("--concurrency", type=_levels, default=[1], help="agents at once, a level each (default: 1)")
    parser.add_argument("--max-tokens", type=_positive, help="tokens each answer is pinned to (default: 128)")
    parser.add_argument(
        "--output-tokens",
        type=_positive,
        help="as --max-tokens (vLLM bench's --random-output-len); give one of the two",
    )
    parser.add_argument(
        "--prompt-tokens", type=_positive, help="each prompt built to this many of the server's tokens (POST /tokenize)"
    )
    parser.add_argument("--rounds", type=_positive, default=3, help="measured rounds a level (default: 3)")
    parser.add_argument("--model", help="the model to ask for at URL (default: the one the server lists)")
    parser.add_argument("--protocol", choices=("openai", "ollama"), default="openai", help="the URL's protocol")
    parser.add_argument("--api-key-env", help="the environment variable holding the URL's API key")
    parser.add_argument("--against", help="a second running server's base URL: each level an A/B item, URL against it")
    parser.add_argument("--hardware", default="auto", help="the hardware profile the run is named for")
    parser.add_argument("--json", type=Path, help="write the run's JSON here")
    parser.add_argument(
        "--history",
        help="add the run to this results history, a SQLite path or postgresql:// URL (`history`, `compare --store`)",
    )
    parser.add_argument("--html", type=Path, help="write the HTML report here (the html extra)")
    parser.add_argument("--write-test", type=Path, help="keep the equivalent test file here, to run under pytest")


def pytest_arguments(args: argparse.Namespace, test: Path) -> list[str]:
    """The pytest command line the run is, from the test file it wrote: what `--write-test` tells the user to run."""
    argv = [str(test), f"--swarm-hardware={args.hardware}"]
    argv += [f"--swarm-json={args.json}"] if args.json else []
    argv += [f"--swarm-history={_store(args.history)}"] if args.history else []
    argv += [f"--swarm-html={args.html}"] if args.html else []
    return argv


def _store(location: str) -> str:
    """A SQLite path made absolute: the run's pytest starts in a folder of its own."""
    return location if "://" in location else str(Path(location).expanduser().resolve())


def _server(args: argparse.Namespace, url: str | None) -> str:
    """The test's server: `Server.endpoint(...)` at a URL, else the embedded engine."""
    if url is None:
        return "Server.llamacpp()"
    named = [repr(base_url(url))]
    named += [f"model={args.model!r}"] if args.model else []
    named += [f"protocol={args.protocol!r}"] if args.protocol != "openai" else []
    named += [f"api_key_env={args.api_key_env!r}"] if args.api_key_env else []
    return f"Server.endpoint({', '.join(named)})"


def _lengths(args: argparse.Namespace) -> str:
    """The marker's lengths: the answers' (max_tokens=, or output_tokens= as asked), and the prompts' where asked."""
    answers = f"output_tokens={args.output_tokens}" if args.output_tokens else f"max_tokens={args.max_tokens or 128}"
    return answers + (f", prompt_tokens={args.prompt_tokens}" if args.prompt_tokens else "")


def written_test(args: argparse.Namespace, how: str) -> str:
    rest = f"reference={_server(args, args.against)}" if args.against else f"rounds={args.rounds}"
    return TEST.format(
        how=how, server=_server(args, args.url), levels=args.concurrency, lengths=_lengths(args), rest=rest
    )


def run(args: argparse.Namespace) -> int:
    if args.url is None and (args.model or args.api_key_env or args.against):
        print(f"{PROG}: --model, --api-key-env and --against ask a URL's server; none was given", file=sys.stderr)
        return 2
    if args.max_tokens and args.output_tokens:
        print(f"{PROG}: --max-tokens and --output-tokens say the same; give one", file=sys.stderr)
        return 2
    for url in (args.url, args.against):
        try:
            _reach(args, url)
        except (SpecError, BootError) as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="pytest-swarm-run-") as folder:
        here = Path(folder)
        test = here / FILE
        argv = pytest_arguments(args, test)
        if args.write_test is not None:
            kept = args.write_test.resolve()
            command = " ".join(["pytest", *pytest_arguments(args, kept)])
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(written_test(args, f"Run it with: {command}"), encoding="utf-8")
            print(f"swarm: the test is in {kept}; run it with: {command}", flush=True)
        test.write_text(written_test(args, "A first run's own copy."), encoding="utf-8")
        (here / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # no ini of the user's folder applies
        # No history unless asked for: the run's folder goes with it (the JSON, --json, is what is kept).
        own = ["-v", "-p", "no:cacheprovider", "--rootdir", folder, "-c", f"{here}/pytest.ini"]
        own += [] if args.history else ["--swarm-history=off"]
        code = int(pytest.main([*argv, *own]))
    return {int(pytest.ExitCode.OK): 0, int(pytest.ExitCode.TESTS_FAILED): 1}.get(code, 2)


def _reach(args: argparse.Namespace, url: str | None) -> None:
    """A URL well formed and answering with the model asked (or a single one), before pytest starts: a usage error,
    not a failed item."""
    if url is None:
        return
    from ..engines.external import reach, spec  # here: the engines load only for a run on a URL

    reach(spec(url, model=args.model, protocol=args.protocol, api_key_env=args.api_key_env))
