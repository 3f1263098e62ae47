"""The GPU check's CPU form (benchmarks/gpu_check.py --device cpu), as CI runs it so that the script cannot rot before
a GPU is at hand: the A/B of `transformers serve` batched against one request at a time, NVML's figures said absent,
and the GPU lock held by one of two pytest processes at a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import servers_left
from tests.engines.test_vllm_real import vllm_executable

pytestmark = pytest.mark.e2e(
    reason="the GPU check's CPU form: an A/B whose verdict is a measurement (run with nothing beside it), and two "
    "pytest processes on one lock"
)

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


def test_the_gpu_checks_cpu_form_holds_every_check_and_writes_them(tmp_path: Path, tagged: str) -> None:
    transformers = Path(vllm_executable()).with_name("transformers")
    results = tmp_path / "results.txt"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", f"--transformers={transformers}", f"--results={results}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = results.read_text().splitlines()
    assert lines[0].startswith("# ") and lines[0].endswith("device cpu"), lines[0]
    text = "\n".join(lines)
    assert (
        "  throughput x" in text and "= streams decoding at once" in text.split("  throughput x", 1)[1].split("\n")[0]
    )
    assert "  pairing: co-located: no GPU to share: neither side holds a GPU" in lines
    assert "  verdict pass; transformers " in text
    assert "GPU memory per server process (NVML): not available" in text, "no NVML here: said, not left blank"
    assert "each measured with GPU 0's queue at its own ticket: [True, True]" in text
    assert lines[-2:] == ["held: A/B on one device", "held: GPU lock across two pytest processes"]
    assert servers_left(tagged) == []
