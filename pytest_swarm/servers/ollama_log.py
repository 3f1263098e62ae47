"""What Ollama's own log says about the parallel slots it really gave a model.

Ollama has no API that reports the slots of a loaded model; its log does:

- the runner logs each load request, `msg=load request="{Operation:commit ...
  Parallel:4 ...}"` (runner/ollamarunner/runner.go and runner/llamarunner/runner.go,
  `slog.Info("load", "request", req)`, a `llm.LoadRequest` printed with %+v);
- releases before the runner rewrite started `llama server` with `--parallel 4`
  on its command line (`msg="starting llama server" cmd=...`);
- the scheduler forces one slot for some architectures and says so:
  `msg="model architecture does not currently support parallel requests"`
  (server/sched.go).

The last word wins: a model loaded twice is judged by its latest load.
"""

from __future__ import annotations

import re

_LOAD = re.compile(r'msg=load request="\{[^"]*?\bParallel:(\d+)')
_CMDLINE = re.compile(r"starting llama server.*?--parallel[ =](\d+)")
FALLBACK = "does not currently support parallel requests"


def parallel_from_log(text: str) -> tuple[int | None, str | None]:
    """(slots the latest load used, the scheduler's fallback warning if any); None where the log is silent."""
    slots = None
    for line in text.splitlines():
        match = _LOAD.search(line) or _CMDLINE.search(line)
        if match:
            slots = int(match.group(1))
    warning = next((line.strip() for line in reversed(text.splitlines()) if FALLBACK in line), None)
    return slots, warning
