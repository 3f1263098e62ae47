"""Hard limits (`< 2.0`, `>= 300`): parsed strictly, applied exactly, printed back as written."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.core.figure_names import HIGHER
from pytest_swarm.core.limits import Limit
from pytest_swarm.gate.statistics import Claim, LogSample, Verdict, compare

# --- Limit ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "op", "bound"),
    [
        ("< 2.0", "<", 2.0),
        ("<= 2", "<=", 2.0),
        ("> 300", ">", 300.0),
        (">= 300.5", ">=", 300.5),
        ("== 0", "==", 0.0),
        ("!= -1", "!=", -1.0),
        ("  <   2.0  ", "<", 2.0),
        ("<2", "<", 2.0),
        ("< 1e-3", "<", 1e-3),
        ("<= 2.5E+2", "<=", 250.0),
        (">= .5", ">=", 0.5),
        ("> +4.", ">", 4.0),
        ("\t==\t7\n", "==", 7.0),
    ],
)
def test_limit_parse(text: str, op: str, bound: float) -> None:
    """Every operator, any whitespace, signs, bare dots and scientific notation."""
    limit = Limit.parse(text)
    assert (limit.op, limit.bound) == (op, bound)


@pytest.mark.parametrize(
    "text", ["<", "2.0", "=< 3", "< abc", None, "", "<< 2", "< 2 3", "= 2", "< inf", "< nan", "2 <"]
)
def test_limit_parse_rejects(text: str | None) -> None:
    """A malformed limit is an error that quotes what was written, so the marker error can show it."""
    with pytest.raises(ValueError, match="limit") as info:
        Limit.parse(text)  # type: ignore[arg-type]
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    ("op", "below", "at", "above"),
    [
        ("<", True, False, False),
        ("<=", True, True, False),
        (">", False, False, True),
        (">=", False, True, True),
        ("==", False, True, False),
        ("!=", True, False, True),
    ],
)
def test_limit_holds(op: str, below: bool, at: bool, above: bool) -> None:
    """Each operator on a value below, at and above its bound; a missing value never holds."""
    limit = Limit.parse(f"{op} 2.0")
    assert (limit.holds(1.999), limit.holds(2.0), limit.holds(2.001)) == (below, at, above)
    assert limit.holds(None) is False


@given(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), st.floats(allow_nan=False, allow_infinity=False))
def test_limit_str_round_trips(op: str, bound: float) -> None:
    """str(limit) is what reports show; it must parse back to the same operator (and the bound to 6 digits)."""
    limit = Limit(op, bound)
    again = Limit.parse(str(limit))
    assert again.op == op
    assert again.bound == pytest.approx(bound, rel=1e-5)


def test_boots_needed_reaches_the_target_power_and_no_fewer_would() -> None:
    from pytest_swarm.gate.statistics import boots_needed, power

    sd = math.log1p(0.02)
    n = boots_needed(sd, 0.1, 0.01)
    assert n is not None and n >= 2
    assert power(n, sd, 0.1, 0.01, 0.2) >= 0.9
    assert n == 2 or power(n - 1, sd, 0.1, 0.01, 0.2) < 0.9
    assert boots_needed(math.log1p(0.5), 0.1, 0.01, limit=8) is None, (
        "a very noisy figure cannot be gated with few boots"
    )
    assert (boots_needed(math.log1p(0.05), 0.1, 0.01) or 99) >= n, "more spread never needs fewer boots"


def test_power_agrees_with_a_simulation_of_the_gate() -> None:
    """Simulate the real decision (compare) on log-normal boots: the analytic power is within a few points."""
    from pytest_swarm.gate.statistics import power

    rng = np.random.default_rng(7)
    sd, n, tol, alpha, drop = math.log1p(0.06), 4, 0.1, 0.01, 0.2
    fails = 0
    sims = 1500
    for _ in range(sims):
        base = rng.normal(0.0, sd, n)
        cur = rng.normal(math.log1p(-drop), sd, n)
        verdict = compare(
            Claim("f", HIGHER, LogSample(tuple(cur), True), LogSample(tuple(base), True), tol), alpha, 0.03
        ).verdict
        fails += verdict is Verdict.FAIL
    # Welch's df is at most the pooled 2n-2, so the real gate is a little more careful than the pooled formula.
    assert power(n, sd, tol, alpha, drop) - 0.08 <= fails / sims <= power(n, sd, tol, alpha, drop) + 0.03
