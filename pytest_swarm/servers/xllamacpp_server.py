"""A `llama-server` look-alike backed by the `xllamacpp` wheel, run as a child process.

It takes the subset of llama-server's flags that the plugin and most users need,
with the same names, so one argv serves both a real `llama-server` binary and this
wheel. A flag it does not know is refused (exit status 2, named in the log) rather
than ignored: a silently dropped flag would measure a different server.

Run as `python -m pytest_swarm.servers.xllamacpp_server --model M --port P ...`.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys

PARENT_PID_ENV = "PYTEST_SWARM_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL us when the pytest that started us dies, even by SIGKILL."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    expected = os.environ.get(PARENT_PID_ENV)
    if expected and os.getppid() != int(expected):
        os._exit(1)


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
    return parser.parse_args(argv)


def build_params(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_size
    params.endpoint_metrics = args.metrics
    params.endpoint_slots = True
    params.cont_batching = args.cont_batching
    params.cache_prompt = args.cache_prompt
    if args.alias:
        params.model_alias = args.alias
    if args.threads:
        params.cpuparams.n_threads = args.threads
    if args.threads_batch or args.threads:
        params.cpuparams_batch.n_threads = args.threads_batch or args.threads
    if args.batch_size:
        params.n_batch = args.batch_size
    if args.ubatch_size:
        params.n_ubatch = args.ubatch_size
    return params


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # Block the stop signals before llama.cpp starts its threads, so that they inherit
    # the mask and the signal reaches the sigwait below instead of a C++ thread.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    import xllamacpp

    server = xllamacpp.Server(build_params(args))
    print(f"xllamacpp {xllamacpp.__version__} listening on {server.listening_address}", flush=True)
    received = signal.sigwait(stop_signals)
    print(f"stopping on {signal.Signals(received).name}", flush=True)
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
