"""`depthpe demo` in a real browser (headless system Chromium through playwright, issue 44 item 4): upload
four images and their cameras, press Predict, see the message, the depth maps and the 3D view, and
download the zip; upload a file that is no image and see the one-line message. Nothing is fetched from
outside the page's own server. Skipped, with the reason, where Chromium, playwright or gradio is
missing. Screenshots are kept in test-artifacts/ (tests/helpers/browser.py)."""

from __future__ import annotations

import subprocess
import time
import zipfile

import pytest

from tests.helpers.browser import (artifacts_dir, free_port, launch_or_skip, open_page, outside, pixel_std,
                                  start_depthpe_server, sync_playwright_or_skip)
from tests.helpers.demo import VIEWS, write_demo_inputs

pytest.importorskip("gradio", reason="gradio, the demo extra (an optional extra that the dev extra installs, so CI runs these tests; skipped only in a checkout installed without it: pip install 'depthpe[demo]')")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`depthpe demo --model M --port P` in a subprocess; yields (inputs, URL it printed)."""
    root = tmp_path_factory.mktemp("demo")
    paths = write_demo_inputs(root)
    proc, url = start_depthpe_server(["demo", "--model", str(paths["model"]), "--port", str(free_port()),
                                      "--device", "cpu"])
    yield paths, url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # after a prediction it has outlived SIGTERM (60 s in CI): do not wait on
        proc.kill()
        proc.wait(timeout=30)


def _open(browser, url):
    page, requests = open_page(browser, url, {"width": 1280, "height": 1000})
    page.wait_for_selector("#predict", timeout=60_000)
    return page, requests


def _predict(page, images, cameras):
    page.locator("#images input[type=file]").set_input_files([str(p) for p in images])
    if cameras:
        page.locator("#cameras input[type=file]").set_input_files([str(p) for p in cameras])
    page.wait_for_timeout(1500)  # the uploads finish
    page.locator("#predict").click()


def test_upload_predict_view_and_download(served, tmp_path):
    paths, url = served
    with sync_playwright_or_skip() as p:
        browser = launch_or_skip(p)
        page, requests = _open(browser, url)
        _predict(page, paths["images"], [paths["cams"]])
        page.wait_for_selector(f"#message >> text=Predicted {VIEWS} image(s)", timeout=180_000)
        assert page.locator("#depth img").count() >= VIEWS
        page.wait_for_selector("#view3d canvas", timeout=60_000)
        time.sleep(3)  # the first frames of the 3D view
        page.screenshot(path=str(artifacts_dir() / "demo_predict.png"), full_page=True)
        assert pixel_std(page.locator("#view3d canvas").screenshot()) > 1.0  # not a blank canvas
        with page.expect_download(timeout=60_000) as download:
            page.locator("#zip a").first.click()
        saved = tmp_path / "prediction.zip"
        download.value.save_as(saved)
        names = zipfile.ZipFile(saved).namelist()
        assert "points.ply" in names and "export/colmap/sparse/0/images.bin" in names
        assert "export/nerfstudio/transforms.json" in names
        assert not outside(requests, url), outside(requests, url)[:5]
        browser.close()


def test_a_bad_upload_shows_a_message(served, tmp_path):
    paths, url = served
    fake = tmp_path / "holiday.png"
    fake.write_text("this is not a picture")
    with sync_playwright_or_skip() as p:
        browser = launch_or_skip(p)
        page, _ = _open(browser, url)
        _predict(page, [*paths["images"], fake], [])
        page.wait_for_selector("#message >> text=holiday.png: cannot read the image", timeout=120_000)
        page.screenshot(path=str(artifacts_dir() / "demo_bad_upload.png"), full_page=True)
        assert "Traceback" not in page.content()
        browser.close()
