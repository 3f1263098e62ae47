"""The vLLM example's report section (examples/conftest.py), read from items shaped as the plugin hands them over.

Apart from tests/test_engine_examples.py, whose tests run pytest on the examples and sit in the engine tier: this one
runs no pytest and belongs in the fast tier, where a change to the figures' shape shows at once.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_the_vllm_examples_table_is_the_write_ups_serial_swarm_speedup_one_row_a_configuration() -> None:
    """examples/conftest.py's report section, read from items as the plugin hands them over: a sweep's C=1 and C=4
    items make a row; A/B items and sweeps without both levels make none. The figures are the items' own."""
    spec = importlib.util.spec_from_file_location("examples_conftest", EXAMPLES / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def item(name: str, level: int, tps: float, speedup: float | None, tp: int = 1, bind: str = "1") -> Any:
        server = SimpleNamespace(
            model="qwen3-moe-tiny", tensor_parallel=tp, device="cpu", env=(("VLLM_CPU_OMP_THREADS_BIND", bind),)
        )
        figures = SimpleNamespace(
            requests=4,
            concurrency=level,
            effective_tps=tps,
            facets=SimpleNamespace(sweep=SimpleNamespace(speedup=speedup)),
        )
        return SimpleNamespace(
            nodeid=f"test_engines_vllm.py::{name}[c{level}]", reference=None, result=figures, server=server
        )

    ab = item("test_ab", 4, 30.0, None)
    ab.reference = object()
    rows = module.seed_table(
        [
            item("test_tp1", 1, 10.8, None),
            item("test_tp1", 4, 14.5, 1.34),
            item("test_tp2", 1, 9.4, None, 2, "0|1"),
            item("test_tp2", 4, 11.8, 1.26, 2, "0|1"),
            item("test_only_c1", 1, 5.0, None),
            ab,
        ]
    )
    assert rows == [
        "",
        "| Config | Serial (1 agent) | Swarm (4 agents) | Speedup |",
        "|---|---|---|---|",
        "| qwen3-moe-tiny (TP=1, core 1) | 10.8 tok/s | 14.5 eff. tok/s | 1.34x |",
        "| qwen3-moe-tiny (TP=2, cores 0 and 1) | 9.4 tok/s | 11.8 eff. tok/s | 1.26x |",
    ]
    assert module.seed_table([item("test_only_c1", 1, 5.0, None)]) == []
