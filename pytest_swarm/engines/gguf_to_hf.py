"""Turn a GGUF checkpoint into a Hugging Face directory that vLLM can serve.

    <vLLM env>/bin/python pytest_swarm/engines/gguf_to_hf.py GGUF OUTDIR [--dtype bfloat16|float32] [--overwrite]

Run by path with the vLLM environment's python, which has torch, transformers, accelerate and gguf: it imports
nothing from pytest_swarm. OUTDIR appears complete or not at all. Why the model is dequantized at load:
docs/engines.md. Exit status: 0 done, 1 the conversion failed, 2 bad use or missing packages."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

PROG = "gguf_to_hf"
REQUIRED = ("torch", "transformers", "accelerate", "gguf")


def fail(message: str, code: int = 1, prog: str = PROG) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(code)


def check_packages(required: tuple[str, ...] = REQUIRED, prog: str = PROG) -> None:
    """Name every missing package at once, before minutes of loading would end in an ImportError (tiny_models.py
    asks the same of its own packages)."""
    missing = [name for name in required if importlib.util.find_spec(name) is None]
    if missing:
        fail(
            f"missing Python package(s) {', '.join(missing)} in {sys.executable}; "
            "run this script with the vLLM env's python, "
            f"or: {sys.executable} -m pip install {' '.join(missing)}",
            code=2,
            prog=prog,
        )


def read_each_gguf_once() -> None:
    """One parse of a GGUF for everything this process reads of it: transformers parses the file anew for the config,
    the weights and the tokenizer, and so would the flags below (GGUFReader walks every one of a vocabulary's 262,144
    tokens each time, three quarters of the conversion's minute here). The readers only read."""
    import gguf

    made = gguf.GGUFReader

    @functools.cache
    def parsed(path: str) -> Any:
        return made(path)

    def reader(path: str | os.PathLike[str], mode: str = "r") -> Any:
        return parsed(str(Path(path).resolve())) if mode == "r" else made(path, mode)

    gguf.GGUFReader = reader


def load_model(gguf: Path, dtype: Any) -> Any:
    import transformers
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"gguf_file": gguf.name, "dtype": dtype}
    gguf_config = getattr(transformers, "GgufConfig", None)
    if gguf_config is not None:
        kwargs["quantization_config"] = gguf_config(gguf_file=gguf.name, dequantize=True)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), **kwargs)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:  # a transformers without GgufConfig: the same public clean-up, by hand
        quantizer.remove_quantization_config(model)
    if getattr(model, "hf_quantizer", None) is not None or getattr(model.config, "quantization_config", None):
        raise RuntimeError(
            "the model still carries a quantization config after loading; save_pretrained would refuse it"
        )
    return model


def gguf_tokenizer_flags(gguf: Path) -> dict[str, bool]:
    """tokenizer.ggml.add_bos_token / add_eos_token from the GGUF header: transformers' tokenizer conversion drops
    them."""
    import gguf as package

    fields = package.GGUFReader(str(gguf)).fields
    flags: dict[str, bool] = {}
    for key in ("add_bos_token", "add_eos_token"):
        field = fields.get(f"tokenizer.ggml.{key}")
        if field is not None:
            flags[key] = bool(field.contents())
    return flags


def save_tokenizer(tokenizer: Any, flags: dict[str, bool], outdir: Path) -> None:
    """Save the tokenizer with the GGUF's add_bos/add_eos flags: the converted one drops <bos>, and Gemma needs it."""
    for key, value in flags.items():
        if hasattr(tokenizer, key):
            setattr(tokenizer, key, value)
    tokenizer.save_pretrained(str(outdir))
    path = outdir / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config.update(flags)
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def check_tokenizer(outdir: Path, flags: dict[str, bool]) -> None:
    """Load the saved tokenizer back, as vLLM will: the flags must survive the round trip, not just be set in memory."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(outdir))
    ids = tokenizer("Hello world").input_ids
    if flags.get("add_bos_token") and (not ids or ids[0] != tokenizer.bos_token_id):
        raise RuntimeError(f"saved tokenizer does not prepend <bos> although the GGUF asks for it: {ids}")
    if flags.get("add_bos_token") is False and ids and ids[0] == tokenizer.bos_token_id:
        raise RuntimeError(f"saved tokenizer prepends <bos> although the GGUF says not to: {ids}")
    print(f"{PROG}: tokenizer check: 'Hello world' -> {ids}", flush=True)


def convert(gguf: Path, dtype_name: str, tmp: Path) -> None:
    import torch
    from transformers import AutoTokenizer

    read_each_gguf_once()
    started = time.monotonic()
    print(f"{PROG}: loading {gguf} as {dtype_name}", flush=True)
    model = load_model(gguf, getattr(torch, dtype_name))
    parameters = sum(p.numel() for p in model.parameters())
    print(
        f"{PROG}: loaded {model.config.model_type} ({parameters / 1e6:.1f}M parameters) "
        f"in {time.monotonic() - started:.1f}s",
        flush=True,
    )
    model.save_pretrained(str(tmp))
    flags = gguf_tokenizer_flags(gguf)
    save_tokenizer(AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name), flags, tmp)
    check_tokenizer(tmp, flags)
    for needed in ("config.json", "tokenizer_config.json"):
        if not (tmp / needed).exists():
            raise RuntimeError(f"{needed} was not written")
    if not any(tmp.glob("*.safetensors")):
        raise RuntimeError("no .safetensors file was written")


def publish(tmp: Path, out: Path) -> None:
    """Rename the finished directory into place; an old OUTDIR (--overwrite) is moved aside first, so OUTDIR is never
    half-written."""
    if not out.exists():
        tmp.rename(out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Convert a GGUF file to a Hugging Face model directory for vLLM."
    )
    parser.add_argument("gguf", type=Path)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUTDIR")
    args = parser.parse_args(argv)

    gguf: Path = args.gguf.resolve()
    out: Path = args.outdir.absolute()
    if not gguf.is_file():
        fail(f"GGUF file not found: {gguf}", code=2)
    if out.exists() and not args.overwrite:
        fail(f"{out} already exists (pass --overwrite to replace it)", code=2)
    check_packages()

    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        convert(gguf, args.dtype, tmp)
        publish(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, Exception):
            fail(f"conversion of {gguf.name} failed: {type(exc).__name__}: {exc}")
        raise
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{PROG}: wrote {out} ({size / 1e6:.0f} MB) in {time.monotonic() - started:.1f}s")
    for f in sorted(out.iterdir()):
        print(f"  {f.name}  {f.stat().st_size}")
    return 0


if __name__ == "__main__":
    # Run by path, sys.path[0] is this directory, whose vllm.py and models.py would shadow any real package of that
    # name.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    sys.exit(main())
