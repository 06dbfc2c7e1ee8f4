"""Headless Chromium for the report.html tests: found, or installed (root on Debian), else a
failure that says what to install. `python -m tests.support.browser` installs it (make test).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html import unescape as html_unescape
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


# Added to a copy of a page only: the report itself runs no script (its policy forbids it).
_MEASURE = """<script>
const boxes = [...document.querySelectorAll(%s)].map((e) => {
  const r = e.getBoundingClientRect();
  return [Math.round(r.left), Math.round(r.top), Math.round(r.width)];
});
const out = document.createElement("pre");
out.id = "planrun-layout";
out.textContent = JSON.stringify(boxes);
document.body.append(out);
</script>"""


def layout_boxes(page: Path, selector: str, width: int) -> list[tuple[int, int, int]]:
    """(left, top, width) of each element selector matches, laid out by Chromium in a window
    `width` pixels wide. A copy of the page beside it, without its content policy and with a
    measuring script, is what gets loaded; the page itself is left as it is."""
    html = page.read_text(encoding="utf-8")
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    html = html.replace("</body>", _MEASURE % json.dumps(selector) + "</body>")
    copy = page.with_name(f".measure-{page.name}")
    copy.write_text(html, encoding="utf-8")
    try:
        dom = run_chromium(copy, "--dump-dom", f"--window-size={width},1200")
    finally:
        copy.unlink()
    found = re.search(r'<pre id="planrun-layout">(.*?)</pre>', dom, re.DOTALL)
    if found is None:
        raise RuntimeError("the measuring script did not run")
    return [tuple(box) for box in json.loads(html_unescape(found.group(1)))]


if __name__ == "__main__":
    try:
        print(f"chromium: {ensure_chromium()}")
    except BrowserMissing as missing:
        print(f"error: {missing}", file=sys.stderr)
        sys.exit(1)
