"""The demo's request function (depthpe.demo.app.run_prediction, issue 44 item 4) without a browser:
a good upload gives depth maps, a GLB and a zip with the exports; every bad upload gives one line on
the page (never a traceback) naming the file, not the server's folders."""

import zipfile

import pytest

from depthpe.demo.app import DemoModel, run_prediction
from depthpe.demo.uploads import UploadLimits
from tests.helpers.demo import VIEWS, write_demo_inputs


@pytest.fixture(scope="module")
def demo_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    paths = write_demo_inputs(root)
    return root, paths, DemoModel(str(paths["model"]))


def _run(demo_inputs, images, cameras, limits=None):
    root, _, demo = demo_inputs
    return run_prediction(demo, [str(p) for p in images], [str(p) for p in cameras], 4, 0, 1,
                          limits or UploadLimits(), root)


@pytest.mark.parametrize("cameras", ["cams", "colmap"])
def test_a_good_upload(demo_inputs, cameras):
    _, paths, _ = demo_inputs
    cams = paths[cameras] if isinstance(paths[cameras], list) else [paths[cameras]]
    message, gallery, glb, archive = _run(demo_inputs, paths["images"], cams)
    assert message.startswith(f"Predicted {VIEWS} image(s) at 126x70") and "colmap, nerfstudio" in message
    assert [name for _, name in gallery] == [f"v{i}.png" for i in range(VIEWS)]
    assert open(glb, "rb").read(4) == b"glTF"
    names = zipfile.ZipFile(archive).namelist()
    assert {"points.ply", "prediction.json", "v0_depth.png", "export/colmap/sparse/0/points3D.bin",
            "export/nerfstudio/transforms.json"} <= set(names)


def test_bad_uploads_get_one_line(demo_inputs, tmp_path):
    root, paths, _ = demo_inputs
    text = tmp_path / "notes.png"
    text.write_text("not a picture")
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    other = tmp_path / "other.json"
    other.write_text(paths["cams"].read_text().replace("v0.png", "x0.png").replace("v1.png", "x1.png")
                     .replace("v2.png", "x2.png").replace("v3.png", "x3.png"))
    cases = [
        ([], [], UploadLimits(), "upload at least one image"),
        (paths["images"] + [text], [], UploadLimits(), "notes.png: cannot read the image"),
        ([pdf], [], UploadLimits(), "paper.pdf is not an image"),
        (paths["images"], [], UploadLimits(max_images=2), "4 images uploaded; this demo takes at most 2"),
        (paths["images"], [], UploadLimits(max_mb=1e-4), "the limit is 0.0001 MB per file"),
        (paths["images"], [other], UploadLimits(), "the cameras name none of the uploaded images"),
        (paths["images"], [paths["cams"], other], UploadLimits(), "cameras: upload one cameras .json"),
        (paths["images"], [text], UploadLimits(), "cameras: upload one cameras .json"),
        (paths["images"], [], UploadLimits(), "needs cameras"),
    ]
    for images, cameras, limits, expected in cases:
        message, gallery, glb, archive = _run(demo_inputs, images, cameras, limits)
        assert message.startswith("**Error:**") and expected in message, (expected, message)
        assert "\n" not in message and "Traceback" not in message and str(root) not in message
        assert gallery == [] and glb is None and archive is None
