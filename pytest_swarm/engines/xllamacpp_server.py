"""A `llama-server` look-alike on the `xllamacpp` wheel; an unknown flag is refused, since a dropped one would
measure another server."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

COMMAND: tuple[str, ...] = (sys.executable, "-P", str(Path(__file__).resolve()))
"""This module run as a script: `-m` would import the package first, a cost at every boot
(benchmarks/boot_costs_results.txt)."""
PARENT_PID_ENV = "PYTEST_SWARM_PARENT_PID"
REASONING_FORMATS = {
    "none": "COMMON_REASONING_FORMAT_NONE",
    "auto": "COMMON_REASONING_FORMAT_AUTO",
    "deepseek-legacy": "COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY",
    "deepseek": "COMMON_REASONING_FORMAT_DEEPSEEK",
}
"""llama-server's --reasoning-format values and xllamacpp's names for them: where the thought goes (`deepseek`:
`reasoning_content`; `none`: left in the content)."""
SPEC_TYPES = ("none", "draft-simple", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
"""llama-server's --spec-type values this look-alike passes on (xllamacpp's COMMON_SPECULATIVE_TYPE_ names, dashes as
underscores): a draft model of its own (`--model-draft`), or n-grams of the context, which need none."""


def die_with_parent(poll_s: float = 0.5) -> None:
    """Exit when the pytest that started us is gone, even by SIGKILL. Polled: PR_SET_PDEATHSIG follows the parent
    thread."""
    expected = int(os.environ.get(PARENT_PID_ENV) or os.getppid())

    def watch() -> None:
        while os.getppid() == expected:
            time.sleep(poll_s)
        os._exit(1)

    if os.getppid() != expected:
        os._exit(1)
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="xllamacpp_server", description=__doc__)
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("-np", "--parallel", type=int, default=1)
    parser.add_argument("-c", "--ctx-size", type=int, default=0)
    parser.add_argument("-t", "--threads", type=int, default=None)
    parser.add_argument("-tb", "--threads-batch", type=int, default=None)
    parser.add_argument("-b", "--batch-size", type=int, default=None)
    parser.add_argument("-ub", "--ubatch-size", type=int, default=None)
    parser.add_argument("-a", "--alias", default=None)
    parser.add_argument("--metrics", action="store_true")
    parser.add_argument("--no-cont-batching", dest="cont_batching", action="store_false")
    parser.add_argument("--no-cache-prompt", dest="cache_prompt", action="store_false")
    parser.add_argument("--jinja", dest="jinja", action="store_true", default=True)
    parser.add_argument("--no-jinja", dest="jinja", action="store_false")
    parser.add_argument("--chat-template-file", default=None)
    parser.add_argument("--reasoning-format", choices=sorted(REASONING_FORMATS), default=None)
    parser.add_argument("-fit", "--fit", choices=("on", "off"), default=None)
    parser.add_argument("--spec-type", choices=SPEC_TYPES, default=None)
    parser.add_argument("-md", "--model-draft", default=None)
    parser.add_argument("--spec-draft-n-max", "--draft-max", type=int, default=None)
    return parser.parse_args(argv)


def fits(asked: str | None, devices: list[dict[str, object]]) -> bool:
    """Whether llama.cpp fits the model to free device memory (`--fit`); unasked, only with a device other than the
    CPU."""
    if asked is not None:
        return asked == "on"
    return any(str(device.get("name", "CPU")) != "CPU" for device in devices)


def build_params(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    if hasattr(params, "hostnames"):
        params.hostnames = [args.host]
    else:  # releases before 2026.10 listen on one host
        params.hostname = args.host
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_size
    params.endpoint_metrics = args.metrics
    params.endpoint_slots = True
    params.cont_batching = args.cont_batching
    params.cache_prompt = args.cache_prompt
    params.use_jinja = args.jinja
    params.fit_params = fits(args.fit, xllamacpp.get_device_info())
    if args.chat_template_file:
        params.chat_template = Path(args.chat_template_file).read_text(encoding="utf-8")
    if args.reasoning_format:
        params.reasoning_format = getattr(xllamacpp.common_reasoning_format, REASONING_FORMATS[args.reasoning_format])
    if args.alias:
        params.model_alias = {args.alias} if isinstance(params.model_alias, set) else args.alias
    if args.threads:
        params.cpuparams.n_threads = args.threads
    if args.threads_batch or args.threads:
        params.cpuparams_batch.n_threads = args.threads_batch or args.threads
    if args.batch_size:
        params.n_batch = args.batch_size
    if args.ubatch_size:
        params.n_ubatch = args.ubatch_size
    speculative(params.speculative, args, xllamacpp.common_speculative_type)
    return params


def speculative(into: Any, args: argparse.Namespace, types: Any) -> None:
    """Speculative decoding as llama-server's flags ask: a draft model implies draft-simple where no type is given."""
    kind = args.spec_type or ("draft-simple" if args.model_draft else None)
    if kind is not None:
        into.types = [getattr(types, "COMMON_SPECULATIVE_TYPE_" + kind.upper().replace("-", "_"))]
    if args.model_draft:
        into.draft.mparams.path = args.model_draft
    if args.spec_draft_n_max is not None:
        into.draft.n_max = args.spec_draft_n_max


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # Block the stop signals before any thread starts (ours or llama.cpp's), so that
    # they inherit the mask and the signal reaches the sigwait below.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    die_with_parent()
    import xllamacpp

    server = xllamacpp.Server(build_params(args))
    print(f"xllamacpp {xllamacpp.__version__} listening on {server.listening_address}", flush=True)
    received = signal.sigwait(stop_signals)
    print(f"stopping on {signal.Signals(received).name}", flush=True)
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
