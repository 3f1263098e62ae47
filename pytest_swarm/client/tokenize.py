"""Counting tokens with the server's own tokenizer: two models count the same text differently.

Special tokens are left out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import httpx

from ..core.errors import TokenizeFailed
from .base import Endpoint

TOKENIZE_TIMEOUT_S = 30.0


def _llamacpp(text: str, model: str) -> dict[str, Any]:
    return {"content": text, "add_special": False}


def _vllm(text: str, model: str) -> dict[str, Any]:
    return {"model": model, "prompt": text, "add_special_tokens": False}


DIALECTS: dict[str, Callable[[str, str], dict[str, Any]]] = {"llamacpp": _llamacpp, "vllm": _vllm}
"""The body of one POST /tokenize, by the dialect an engine names in its ServerInfo (`tokenizer`)."""


def count_tokens(endpoint: Endpoint, dialect: str, texts: Iterable[str]) -> dict[str, int]:
    """Each distinct text's length in the server's tokens, one keep-alive connection for all of them."""
    body = DIALECTS[dialect]
    counts: dict[str, int] = {}
    with httpx.Client(base_url=endpoint.base_url, headers=dict(endpoint.headers), timeout=TOKENIZE_TIMEOUT_S) as client:
        for text in texts:
            if text in counts:
                continue
            try:
                response = client.post("/tokenize", json=body(text, endpoint.model))
                response.raise_for_status()
                tokens = response.json().get("tokens")
            except (httpx.HTTPError, ValueError, AttributeError) as exc:
                raise TokenizeFailed(
                    f"POST {endpoint.base_url}/tokenize ({dialect}) failed on {text[:60]!r}: {exc}"
                ) from None
            if not isinstance(tokens, list):
                raise TokenizeFailed(f"POST {endpoint.base_url}/tokenize ({dialect}) answered no token list")
            counts[text] = len(tokens)
    return counts


def dialect_of(endpoint: Endpoint) -> str | None:
    """The dialect a server someone else runs answers POST /tokenize in (llama.cpp's, then vLLM's), or None where it
    answers neither: what prompt_tokens= needs to build prompts in its tokens."""
    for dialect in DIALECTS:  # llama.cpp's first: llama.cpp answers vLLM's body with an empty list
        try:
            counted = count_tokens(endpoint, dialect, ["hello"])
        except TokenizeFailed:
            continue
        if counted["hello"] > 0:
            return dialect
    return None
