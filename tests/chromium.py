"""Headless Chromium (Debian's `chromium` package) for the HTML report's tests.

One load gives the DOM as the browser built it and every console message the page
produced (Chromium logs them to stderr with `--enable-logging=stderr`); a second
load takes the screenshot. The flags keep the browser from reaching the network on
its own (updates, sync, QUIC probes, first-run pages), and each load gets a fresh
profile, so whatever the page itself fetches or fails shows up in the console.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)
CONSOLE = re.compile(r":CONSOLE[(:]\d+\)?\]\s*(.*)$")
"""Chromium's stderr line for a console message: `[pid:tid:time:INFO:CONSOLE(12)] "text", source: url (12)`."""


def executable() -> str:
    """The browser; a missing one fails the test loudly (CI installs it in .ci/run), never skips it."""
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Chromium is not installed: apt-get install -y chromium (.ci/run installs it in CI)", pytrace=False)
    return path


@dataclass(frozen=True)
class PageLoad:
    dom: str
    console: list[str]
    stderr: str


def _run(page: Path, profile: Path, size: tuple[int, int], action: str) -> subprocess.CompletedProcess[str]:
    profile.mkdir(parents=True, exist_ok=False)  # a fresh profile per load: nothing cached, nothing remembered
    argv = [
        executable(),
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={size[0]},{size[1]}",
        action,
        page.resolve().as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"chromium exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def load(page: Path, workdir: Path, size: tuple[int, int] = (1280, 1600)) -> PageLoad:
    """Load `page` and return the DOM Chromium serialised after loading and the console messages it logged."""
    done = _run(page, workdir / "profile-dom", size, "--dump-dom")
    console = [m.group(1) for line in done.stderr.splitlines() if (m := CONSOLE.search(line))]
    return PageLoad(done.stdout, console, done.stderr)


def screenshot(page: Path, workdir: Path, out: Path, size: tuple[int, int] = (1280, 1600)) -> Path:
    """A PNG of the page's first `size` pixels, as a reader's browser window shows it."""
    _run(page, workdir / "profile-shot", size, f"--screenshot={out.resolve()}")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{out} is not a PNG"
    return out
