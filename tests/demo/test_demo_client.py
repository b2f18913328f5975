"""The demo page through the Gradio client (issue 44 item 4): the Space app.py of `depthpe push
--demo-app`, served in this process with a tiny random model, answers on its `predict` endpoint with
the depth maps, the 3D view and the zip; a bad upload returns the one-line message. Nothing leaves the machine (no share link, analytics off)."""

import os
import zipfile

import pytest

from tests.helpers.demo import VIEWS, serve_demo, write_demo_inputs

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
gradio_client = pytest.importorskip("gradio_client", reason="gradio_client, from the demo extra (an optional extra that the dev extra installs, so CI runs these tests; skipped only in a checkout installed without it: pip install 'depthpe[demo]')")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    paths = write_demo_inputs(root)
    blocks, url = serve_demo(paths["model"], root / "space")
    yield paths, url
    blocks.close()


def test_client_predicts_and_refuses(served, tmp_path):
    paths, url = served
    client = gradio_client.Client(url, download_files=str(tmp_path), verbose=False)
    files = [gradio_client.handle_file(str(p)) for p in paths["images"]]
    message, gallery, glb, archive = client.predict(files, [gradio_client.handle_file(str(paths["cams"]))], 4, 0, 1,
                                                    api_name="/predict")
    assert message.startswith(f"Predicted {VIEWS} image(s)")
    assert len(gallery) == VIEWS and open(glb, "rb").read(4) == b"glTF"
    names = zipfile.ZipFile(archive).namelist()
    assert "export/colmap/sparse/0/cameras.bin" in names
    filtered = sorted(n for n in names if n.endswith("_depth_filtered.npy"))  # fusion 1: the filtered depth too
    assert len(filtered) == VIEWS and len([n for n in names if n.endswith("_depth.npy")]) == VIEWS
    message, gallery, glb, archive = client.predict(files, [], 4, 0, 1, api_name="/predict")
    assert message.startswith("**Error:**") and "needs cameras" in message and archive is None
