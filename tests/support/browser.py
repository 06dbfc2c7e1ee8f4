"""Headless Chromium for the report.html tests: found, or installed (root on Debian), else a
failure that says what to install. `python -m tests.support.browser` installs it (make test).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = "chromium"
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
RUN_SECONDS = 120
INSTALL_SECONDS = 900
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
)


class BrowserMissing(Exception):
    """No Chromium, and this machine cannot install one; the message says what to do."""


def find_chromium() -> str | None:
    return next((path for name in NAMES if (path := shutil.which(name))), None)


def ensure_chromium() -> str:
    """Chromium's path; as root on Debian, `apt-get install chromium` first when missing.

    Raises:
        BrowserMissing: not installed and not installable here.
    """
    if found := find_chromium():
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BrowserMissing(
            "the report.html test needs headless Chromium: install it "
            f"(Debian/Ubuntu: `sudo apt-get install {PACKAGE}`) and run the tests again"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Other jobs on the machine may hold the dpkg lock for a while: wait for it.
    install = ["apt-get", "install", "-y", "-qq", "-o", "DPkg::Lock::Timeout=600", PACKAGE]
    for command in (["apt-get", "update", "-qq"], install):
        result = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=INSTALL_SECONDS
        )
        if result.returncode != 0:
            last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise BrowserMissing(f"`{' '.join(command)}` failed: {last[0]}")
    if found := find_chromium():
        return found
    raise BrowserMissing(f"apt-get installed {PACKAGE}, but no chromium command is on PATH")


def run_chromium(page: Path, *arguments: str) -> str:
    """Chromium's standard output for page with arguments, in a new, throwaway profile."""
    with tempfile.TemporaryDirectory(prefix="planrun-chromium-") as profile:
        command = [
            ensure_chromium(),
            *FLAGS,
            f"--user-data-dir={profile}",
            *arguments,
            page.resolve().as_uri(),
        ]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    if result.returncode != 0:
        raise RuntimeError(f"chromium exited {result.returncode}: {result.stderr[-2000:]}")
    return result.stdout


def dump_dom(page: Path) -> str:
    """The page's DOM after Chromium loaded it, as HTML."""
    return run_chromium(page, "--dump-dom")


def screenshot(page: Path, png: Path, size: tuple[int, int] = (1400, 1800)) -> Path:
    """A PNG of the page's first screen at size (width, height)."""
    run_chromium(page, f"--screenshot={png.resolve()}", f"--window-size={size[0]},{size[1]}")
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot at {png}")
    return png


if __name__ == "__main__":
    try:
        print(f"chromium: {ensure_chromium()}")
    except BrowserMissing as missing:
        print(f"error: {missing}", file=sys.stderr)
        sys.exit(1)
