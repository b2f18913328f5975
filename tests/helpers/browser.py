"""Headless Chromium for the browser tests: Debian's ``chromium`` driven by playwright (its own
browser downloads are never used). ``launch_or_skip`` skips a test, saying why, where either is
missing; screenshots go to ``artifacts_dir()`` (test-artifacts/ at the repository root, or
$DEPTHPE_TEST_ARTIFACTS), kept after the run."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# SwiftShader: software WebGL, so the viewer's canvas renders without a GPU or display.
CHROMIUM_ARGS = ["--no-sandbox", "--enable-unsafe-swiftshader", "--use-angle=swiftshader"]


def chromium_path() -> str | None:
    """The system Chromium ($CHROMIUM, else the first of CHROMIUM_NAMES on PATH), or None."""
    found = os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    return found if found and Path(found).exists() else None


def launch_or_skip(playwright):
    """A headless Chromium browser, or ``pytest.skip`` with the reason."""
    path = chromium_path()
    if path is None:
        pytest.skip("no system Chromium (apt-get install chromium; .ci/run installs it): browser tests skipped")
    return playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)


def sync_playwright_or_skip():
    """playwright's ``sync_playwright`` context, or ``pytest.skip`` when the package is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright; it is in the dev extra)")
    return sync_playwright()


def artifacts_dir() -> Path:
    """Folder for screenshots kept after the tests (created)."""
    folder = Path(os.environ.get("DEPTHPE_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def pixel_std(png: bytes, box: tuple[int, int, int, int] | None = None) -> float:
    """Standard deviation of the grey values of a PNG screenshot (0 for a blank one), optionally of
    the (left, top, right, bottom) ``box`` only."""
    import cv2

    grey = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_GRAYSCALE).astype(np.float64)
    if box is not None:
        grey = grey[box[1]:box[3], box[0]:box[2]]
    return float(grey.std())


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_depthpe_server(argv: list[str], timeout: float = 180.0):
    """``python -m depthpe ARGV`` (a command that serves a page and prints ``open URL in a browser``)
    in a subprocess; returns (process, URL). Fails the test when no URL is printed in time."""
    import re
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "depthpe", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        found = re.search(r"open (http://\S+) in a browser", line)
        if found:
            return proc, found.group(1)
        if time.monotonic() > deadline:
            break
    proc.kill()
    pytest.fail(f"depthpe {argv[0]} printed no URL (exit {proc.wait()})")


def open_page(browser, url: str, viewport: dict):
    """(page, the URLs it requested, recorded from the start) of ``url`` in a new page of ``browser``,
    retrying while the server is still starting."""
    import time

    page = browser.new_page(viewport=viewport)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    for attempt in range(60):
        try:
            page.goto(url)
            break
        except Exception:  # noqa: BLE001 - connection refused while the server starts
            if attempt == 59:
                raise
            time.sleep(1)
    return page, requests


def outside(requests: list[str], url: str) -> list[str]:
    """The requests that left the page's own server (data: and blob: URLs stay in the browser)."""
    from urllib.parse import urlsplit

    home = urlsplit(url).netloc
    return [r for r in requests if urlsplit(r).scheme not in ("data", "blob") and urlsplit(r).netloc != home]
