"""The JSON report (`--swarm-json`): every figure of every item, for machines to read."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from .._util.atomic import write_atomically
from ..figures.summary import ItemFigures
from ..gate.bisection import Bisection, BisectStep
from ..gate.capacity import CapacityFound
from ..gate.flag_search import FlagSearch
from ..gate.where import NoSplit, Where, WhereTimeWent
from ..results.item import Bisected, BisectStepResult, ItemResult, ReferenceSide
from ..results.run import RunReport
from ..specs.changes import differences
from .bisect_text import answer, culprit_differences, step_headline
from .verdict import item_notes, where_text

JSON_VERSION = 1
"""Additions (an A/B item's `reference`, a stored item's `canary`, `gate.against`, the comparisons' new fields) keep the
version: readers of version 1 still read it."""


def _verdict(item: ItemResult) -> dict[str, Any] | None:
    if item.outcome is None:
        return None
    return {
        "verdict": item.outcome.verdict.value,
        "against": item.outcome.against,
        "comparisons": [{**asdict(c), "verdict": c.verdict.value} for c in item.outcome.comparisons],
        "broken_limits": list(item.outcome.broken_limits),
        "notes": item_notes(item),
    }


def json_document(run: RunReport) -> dict[str, Any]:
    """The JSON report; `complete` is false when the run was interrupted, and partial items say `incomplete`.
    `concurrency` is agents per server and `workers` the servers: `agents` is their product."""
    hardware, fingerprint, items, sweeps, complete = run.hardware, run.fingerprint, run.items, run.sweeps, run.complete
    best = {sweep.key: sweep.max_interactive_workers for sweep in sweeps if sweep.says_interactive}
    return {
        "version": JSON_VERSION,
        "hardware": hardware,
        "complete": complete,
        "fingerprint": fingerprint,
        "tests": [
            {
                "nodeid": item.nodeid,
                "server": {**item.server.describe(), **item.server_info},
                "concurrency": item.result.concurrency,
                "workers": item.result.workers,
                "agents": item.result.agents,
                "boots": item.result.boots,
                "incomplete": item.incomplete,
                "rounds": len(item.result.rounds),
                "figures": item.result.figures(),
                "client": {"generators": item.item.load.generators, **_client_load(item.result)},
                "gate": _verdict(item),
                **where_document(item.outcome.where if item.outcome is not None else None),
                "throughput_factors": [f.to_dict() for f in item.outcome.factors] if item.outcome is not None else [],
                **(
                    {"where_ttft_went": item.outcome.where_ttft.to_json()}
                    if item.outcome is not None and item.outcome.where_ttft is not None
                    else {}
                ),
                "reference": _side(item.reference),
                "canary": _side(item.canary),
                "capacity": capacity_document(item.capacity),
                "bisect": bisect_document(item.bisect),
                "answer_lengths": item.answer_lengths,
                **({"max_interactive_workers": best[item.test_key]} if item.test_key in best else {}),
            }
            for item in items
        ],
        "sweeps": [
            {
                "key": sweep.key,
                "levels": list(sweep.levels),
                "measured": list(sweep.measured),
                "missing": list(sweep.missing),
                "complete": sweep.complete,
                **({"max_interactive_workers": sweep.max_interactive_workers} if sweep.says_interactive else {}),
            }
            for sweep in sweeps
        ],
    }


def where_document(where: Where | None) -> dict[str, Any]:
    """`where_time_went` and what it stands on; null with the reason where it could not be split."""
    match where:
        case None:
            return {}
        case NoSplit(reason=reason):
            return {"where_time_went": None, "where": {"line": where_text(where), "reason": reason}}
        case WhereTimeWent():
            return {
                "where_time_went": where.to_json(),
                "where": {
                    "line": where_text(where),
                    "upto": where.upto,
                    "source": where.source,
                    "samples": where.samples,
                    "span": None if where.span is None else where.span.to_dict(),
                    "state": [asdict(s) for s in where.state],
                    "client_bound": list(where.client_bound),
                    "rounds": list(where.rounds),
                    "contradictions": list(where.contradictions),
                    "contradiction": where.contradiction,
                    "unread": where.unread,
                    "unpaired": where.unpaired,
                },
            }


def _side(ref: ReferenceSide | None) -> dict[str, Any] | None:
    """The A/B reference's side, or the canary's: its server and figures, as the item's own are given; None without
    one."""
    if ref is None:
        return None
    return {
        "server": {**ref.server.describe(), **ref.server_info},
        "boots": ref.result.boots,
        "rounds": len(ref.result.rounds),
        "figures": ref.result.figures(),
        "capacity": capacity_document(ref.capacity),
    }


def capacity_document(found: CapacityFound | None) -> dict[str, Any] | None:
    """A capacity search as it ended: the capacity, the range and every step with its verdict; None for other
    items."""
    if found is None:
        return None
    return {
        "what": found.what,
        "range": [found.low, found.high],
        "capacity": found.capacity,
        "bounded": found.bounded,
        "ended": found.ended,
        "steps": [
            {
                "level": s.level,
                "verdict": s.verdict.value,
                "rounds": s.rounds,
                "requests": s.requests,
                "failures": s.failures,
                "figures": dict(s.figures),
                "rss_peak_mib": s.rss_peak_mib,
                "why": s.why,
            }
            for s in found.steps
        ],
    }


def _client_load(result: ItemFigures) -> dict[str, Any]:
    """The harness's own load: when `bound_rounds` > 0, those rounds measured the client."""
    lags = [lag for r in result.rounds if (lag := r.conditions.client_lag_p99_s) is not None]
    shares = [share for r in result.rounds if (share := r.conditions.client_cpu_share) is not None]
    return {
        "bound_rounds": result.client_bound_rounds,
        "lag_p99_ms_max": round(max(lags) * 1000, 3) if lags else None,
        "cpu_share_max": round(max(shares), 3) if shares else None,
        "connections_opened": [r.connections_opened for r in result.rounds],
        "connection_retries": [r.connection_retries for r in result.rounds],
    }


def write_json(path: Path, run: RunReport) -> None:
    document = json_document(run)
    write_atomically(path, orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")


def bisect_document(bisected: Bisected | None) -> dict[str, Any] | None:
    """The JSON item's `bisect`: the servers (or the changes searched), where the search ended, every step, and the
    culprit with where its time went."""
    if bisected is None:
        return None
    search, servers = bisected.search, bisected.servers
    culprit = bisected.culprit
    found = search.first_changed if isinstance(search, Bisection) else None
    return {
        "direction": bisected.direction,
        "servers": [
            {
                "index": index,
                "label": spec.label,
                "differs_from_first": [str(d) for d in differences(servers[0], spec)],
                "server_info": bisected.infos[index] if index < len(bisected.infos) else None,
            }
            for index, spec in enumerate(servers)
        ],
        "changes": [str(change) for change in bisected.changes],
        "first_changed": found,
        "carried_by": list(search.minimal or ()) if isinstance(search, FlagSearch) else None,
        "no_change": search.no_change,
        "left": list(search.left) if isinstance(search, Bisection) and search.left is not None else None,
        "answer": answer(bisected),
        "steps": [_bisect_step(step) for step in bisected.steps],
        "culprit": None
        if culprit is None
        else {
            "probed": culprit.probed,
            "before": found - 1 if found is not None else None,
            "after": found,
            "differences": culprit_differences(bisected),
            **where_document(culprit.outcome.where),
        },
    }


def _bisect_step(result: BisectStepResult) -> dict[str, Any]:
    step, first = result.step, step_headline(result)
    where = (
        {"good": step.good, "bad": step.changed, "probe": step.probe}
        if isinstance(step, BisectStep)
        else {
            "carrying": list(step.carrying),
            "applied": list(step.applied),
        }
    )
    return {
        **where,
        "probed": result.probed,
        "retry": step.retry,
        "finding": step.finding.value,
        "verdict": result.outcome.verdict.value,
        "figure": None if first is None else first.figure,
        "ratio": None if first is None else first.ratio,
        "lower": None if first is None else first.lower,
        "upper": None if first is None else first.upper,
        "pairs": result.pairs,
        "seconds": result.seconds,
        "undecided": result.undecided,
        "crash": result.crash,
    }
