"""`python -m pytest_swarm models`: make the models vLLM serves from this machine's files ahead of a run.

The embedded Gemma converts once (a minute or two of one core) and a tiny model builds once; a run does it at its
first boot otherwise. Made ahead, in a container's build step or beside other work, the first boot is a boot. Exit 0
made or already there, 1 a model could not be made, 2 for usage."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import BootError
from ..specs import EMBEDDED_MODEL, SpecError
from .models import TINY_MODELS, embedded_hf_dir, tiny_hf_dir
from .vllm_command import env_python

NAMES = (EMBEDDED_MODEL, *TINY_MODELS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vllm", required=True, help="the vllm executable whose environment makes and serves them")
    parser.add_argument("models", nargs="+", choices=NAMES, metavar="MODEL", help=f"any of: {', '.join(NAMES)}")


def run(args: argparse.Namespace) -> int:
    executable = Path(args.vllm).expanduser()
    python = env_python(str(executable)) if executable.is_file() else None
    if python is None:
        print(f"models: no vLLM environment's Python found for {executable}", file=sys.stderr)
        return 1
    for name in args.models:
        try:
            made = embedded_hf_dir(python) if name == EMBEDDED_MODEL else tiny_hf_dir(python, name)
        except (BootError, SpecError) as exc:
            print(f"models: {name}: {exc}", file=sys.stderr)
            return 1
        print(f"{name}: {made}")
    return 0
