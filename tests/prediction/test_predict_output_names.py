"""``depthpe predict`` output names (reliability IV items 1 and 4): two images never share an output
stem, and no image name writes outside ``--out``."""

import hashlib
from pathlib import Path

import numpy as np
import pytest

from depthpe.prediction.files import file_stem, file_stems, write_prediction
from depthpe.prediction.result import ImagePrediction, PredictionResult
from depthpe.view.loaders import load_prediction_dir


def _tree_digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _result(names):
    frames = [ImagePrediction(name=n, image=np.full((4, 6, 3), 10 * i, np.uint8),
                              depth=np.full((4, 6), 1.0 + i, np.float32), conf=np.ones((4, 6), np.float32),
                              K=np.array([[5.0, 0, 2.5], [0, 5.0, 1.5], [0, 0, 1]]), w2c=np.eye(4)[:3], views=[i])
              for i, n in enumerate(names)]
    return PredictionResult(frames=frames, size=(4, 6), unit="cameras", mode="all", views_per_prediction=len(names),
                            notes=[])


def test_stems_that_would_coincide_are_disambiguated_and_recorded(tmp_path):
    names = ["a/img_0.jpg", "a__img_0.jpg", "b.png"]
    stems = file_stems(names)
    assert stems[2] == "b" and len(set(stems)) == 3 and all(s.startswith("a__img_0-") for s in stems[:2])
    summary = write_prediction(_result(names), tmp_path / "out")
    assert [f["stem"] for f in summary["frames"]] == stems
    scene = load_prediction_dir(tmp_path / "out")
    assert [float(f.depth[0, 0]) for f in scene.frames] == [1.0, 2.0, 3.0]  # each image kept its own depth


def test_hostile_image_names_stay_inside_out(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep.txt").write_text("x")
    before = _tree_digest(tmp_path)
    names = ["../../outside/victim.png", "/abs/path.png", "..", ".hidden.png"]
    write_prediction(_result(names), tmp_path / "out")
    after = _tree_digest(tmp_path)
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed and all(k.startswith("out/") for k in changed), changed
    assert {k for k in before if k not in after} == set()
    assert [Path(p).parent for p in (tmp_path / "out").iterdir()] == [tmp_path / "out"] * len(list((tmp_path / "out").iterdir()))


def test_the_same_name_twice_is_an_error():
    with pytest.raises(ValueError, match="two images share the name 'x.png'"):
        file_stems(["x.png", "x.png"])
    assert file_stem("dir/sub/img.jpg") == "dir__sub__img"
