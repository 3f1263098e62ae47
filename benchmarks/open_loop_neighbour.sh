#!/usr/bin/env bash
# The main job's open-loop item, five times in a row, with a low-priority busy process (nice 19, one core) beside it:
# does the sender keep its schedule, and does every request finish, on a 2-core box that is not quiet?
#   benchmarks/open_loop_neighbour.sh [RUNS]     (from the repository root, with .venv installed; run it alone)
set -euo pipefail
runs=${1:-5}
echo "# benchmarks/open_loop_neighbour.sh $runs   $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), at $(git rev-parse --short HEAD)"
nice -n 19 python3 -c "while True: pass" &
hog=$!
trap 'kill $hog' EXIT
sleep 2
for i in $(seq "$runs"); do
  echo "== run $i $(date -u +%H:%M:%S)"
  .venv/bin/pytest -v examples/test_agent_swarm.py -k open_loop -p no:randomly 2>&1 |
    grep -E "send lateness|requests failed|passed|failed" | grep -v "^E " || true
done
