"""Build small random-weight models as Hugging Face directories vLLM and `transformers serve` can serve: a MoE and a
dense one of one family, with the embedded Gemma's tokenizer, and a Llama with a word-level tokenizer of its own.

    <env>/bin/python pytest_swarm/engines/tiny_models.py NAME OUTDIR [--tokenizer DIR]

No runner may download weights and throughput does not need trained ones (answers are pinned to `max_tokens`), so the
models are made here from a config and a seed. The Llama's tokenizer is 512 words made here (a few kilobytes, so the
model needs nothing beside this script wherever it runs); each of its tokens decodes to a word and a space, so a
server that streams whole words streams a token a chunk. Run by path as gguf_to_hf.py is.
The models' shapes: docs/engines.md. Writes OUTDIR/tiny_model.json with each model's parameters. Exit status: 0 done,
1 the build failed, 2 bad use or missing packages."""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

PROG = "tiny_models"
REQUIRED = ("torch", "transformers")
SEED = 0

COMMON: dict[str, Any] = {
    "hidden_size": 256,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "rms_norm_eps": 1e-6,
}
"""Both models' shared sizes: two KV heads and four query heads split evenly over two tensor-parallel ranks."""

PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen3-moe-tiny": (
        "qwen3_moe",
        {**COMMON, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 4096, "norm_topk_prob": True},
    ),
    "qwen3-dense-tiny": ("qwen3", {**COMMON, "intermediate_size": 8192}),
    "llama-words-tiny": (
        "llama",
        {**COMMON, "num_hidden_layers": 4, "intermediate_size": 512, "max_position_embeddings": 2048},
    ),
}
"""What each name builds: the transformers model type and its config. `intermediate_size` of a MoE config is unused
(every layer is sparse: decoder_sparse_step 1, no mlp_only_layers)."""

OWN_TOKENIZER = {"llama-words-tiny": 512}
"""The presets that make their tokenizer here (its vocabulary size, the special tokens included): no --tokenizer."""
FLOAT32 = ("llama-words-tiny",)
"""Presets kept in float32: a CPU without bfloat16 units runs a model this small faster in it."""
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<s> {{ m['role'] }} {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<s> assistant {% endif %}"
)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")


def _gguf_to_hf() -> Any:
    """gguf_to_hf.py, run by path: neither script can import the other by name (their directory would shadow vllm)."""
    spec = importlib.util.spec_from_file_location("gguf_to_hf", Path(__file__).with_name("gguf_to_hf.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fail(message: str, code: int = 1) -> NoReturn:
    _gguf_to_hf().fail(message, code, PROG)
    raise AssertionError("unreachable")


def parameters(config: dict[str, Any], vocab: int, qk_norm: bool = True) -> dict[str, int]:
    """Total parameters, and those active a token (its routed experts only), from the model's sizes; `qk_norm`: a
    norm on each head's queries and keys (Qwen3's; Llama has none)."""
    hidden, heads, kv, head_dim = (
        config[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim")
    )
    attention = hidden * heads * head_dim + 2 * hidden * kv * head_dim + heads * head_dim * hidden
    attention += 2 * head_dim if qk_norm else 0
    norms = 2 * hidden
    if "num_experts" in config:
        expert = 3 * hidden * config["moe_intermediate_size"]
        router = hidden * config["num_experts"]
        mlp_total, mlp_active = router + config["num_experts"] * expert, router + config["num_experts_per_tok"] * expert
    else:
        mlp_total = mlp_active = 3 * hidden * config["intermediate_size"]
    layers = config["num_hidden_layers"]
    shared = vocab * hidden + hidden + layers * (attention + norms)
    return {"total": shared + layers * mlp_total, "active": shared + layers * mlp_active}


def word_tokenizer(size: int) -> Any:
    """A word-level tokenizer of `size` tokens (the specials, then `w0`, `w1`, ...), words joined by spaces, with a
    chat template: what a random model's output needs to stream as words."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(size - len(SPECIALS))]
    core = Tokenizer(models.WordLevel({t: i for i, t in enumerate((*SPECIALS, *words))}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build(name: str, tokenizer_dir: Path | None, tmp: Path) -> dict[str, Any]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    model_type, sizes = PRESETS[name]
    if tokenizer_dir is None:
        tokenizer = word_tokenizer(OWN_TOKENIZER[name])
        vocab = len(tokenizer)
        ids = {k: getattr(tokenizer, k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    else:
        source = json.loads((tokenizer_dir / "config.json").read_text())
        source = source.get("text_config", source)
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        vocab = max(int(source["vocab_size"]), len(tokenizer))
        ids = {k: source.get(k, getattr(tokenizer, k, None)) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    config = AutoConfig.for_model(model_type, vocab_size=vocab, **sizes, **ids)
    torch.manual_seed(SEED)
    dtype = torch.float32 if name in FLOAT32 else torch.bfloat16
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    counted = sum(p.numel() for p in model.parameters())
    computed = parameters(sizes, vocab, qk_norm=model_type.startswith("qwen3"))
    if counted != computed["total"]:
        raise RuntimeError(f"the model holds {counted} parameters, the sizes say {computed['total']}")
    model.save_pretrained(str(tmp))
    if tokenizer_dir is None:
        tokenizer.save_pretrained(str(tmp))
    else:
        for file in TOKENIZER_FILES:
            if (tokenizer_dir / file).is_file():
                shutil.copy2(tokenizer_dir / file, tmp / file)
    if not any(tmp.glob("*.safetensors")):
        raise RuntimeError("no .safetensors file was written")
    size = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
    weights = sum(f.stat().st_size for f in tmp.glob("*.safetensors"))
    return {
        "name": name,
        "model_type": model_type,
        "architecture": type(model).__name__,
        "config": sizes,
        "vocab_size": vocab,
        "parameters_total": computed["total"],
        "parameters_active": computed["active"],
        "dtype": str(dtype).removeprefix("torch."),
        "weights_bytes": weights,
        "disk_bytes": size,
        "tokenizer_from": "made here" if tokenizer_dir is None else str(tokenizer_dir),
        "seed": SEED,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Build a small random-weight model to serve.")
    parser.add_argument("name", choices=sorted(PRESETS))
    parser.add_argument("outdir", type=Path)
    parser.add_argument(
        "--tokenizer",
        type=Path,
        help="a model directory whose tokenizer to ship (every preset but those that make one)",
    )
    args = parser.parse_args(argv)

    out: Path = args.outdir.absolute()
    if args.name in OWN_TOKENIZER:
        if args.tokenizer is not None:
            fail(f"{args.name} makes its own tokenizer: give no --tokenizer", 2)
    elif args.tokenizer is None or not (args.tokenizer / "config.json").is_file():
        fail(f"{args.name} ships another model's tokenizer: --tokenizer must name a converted model directory", 2)
    if out.exists():
        fail(f"{out} already exists", 2)
    _gguf_to_hf().check_packages(REQUIRED, PROG)
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        info = build(args.name, args.tokenizer, tmp)
        (tmp / "tiny_model.json").write_text(json.dumps(info, indent=2) + "\n")
        tmp.rename(out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, Exception):
            fail(f"building {args.name} failed: {type(exc).__name__}: {exc}")
        raise
    print(
        f"{PROG}: wrote {out} in {time.monotonic() - started:.1f}s: {info['architecture']}, "
        f"{info['parameters_total'] / 1e6:.1f}M parameters, {info['parameters_active'] / 1e6:.1f}M active a token, "
        f"{info['disk_bytes'] / 2**20:.0f} MiB on disk",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    # Run by path, sys.path[0] is this directory, whose vllm.py would shadow the real package.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    sys.exit(main())
