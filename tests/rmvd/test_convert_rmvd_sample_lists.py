"""scripts/convert_rmvd_sample_lists.py: it refuses any pickle global but the reference's sample
classes and numpy's arrays (nothing of a malicious pickle runs), and it turns the reference's
absolute world-to-camera poses into view_to_key ones that reproject like the world cameras."""

import builtins
import importlib.util
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from depthpe.rmvd.samples import load_sample_list
from depthpe.testing.rmvd_native import FIXTURE_K, frame_w2c
from tests.helpers.rmvd_reference import reference_pickle

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "convert_rmvd_sample_lists.py"


def load_script():
    spec = importlib.util.spec_from_file_location("convert_rmvd_sample_lists", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _RunsACommand:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class _Evaluates:
    def __reduce__(self):
        return builtins.eval, ("1 + 1",)


def _samples(names=("courtyard/key000001",), frames=(1, 2, 3), keyview=0):
    return [{"name": name, "base": "courtyard",
             "data": {"images": [f"images/dslr_images/DSC_{f:04d}.JPG" for f in frames],
                      "depth": f"ground_truth_depth/dslr_images/DSC_{frames[keyview]:04d}.JPG",
                      "intrinsics": [FIXTURE_K.astype(np.float32)] * len(frames),
                      "poses": [frame_w2c(f).astype(np.float32) for f in frames], "keyview_idx": keyview}}
             for name in names]


def test_a_pickle_that_runs_a_command_is_refused_and_nothing_runs(tmp_path):
    script = load_script()
    marker = tmp_path / "it_ran"
    with pytest.raises(pickle.UnpicklingError, match=r"refused: .*system"):
        script.read_reference_pickle(pickle.dumps([_RunsACommand(marker)]), "eth3d")
    with pytest.raises(pickle.UnpicklingError, match=r"refused: .*builtins\.eval"):
        script.read_reference_pickle(pickle.dumps(_Evaluates()), "eth3d")
    assert not marker.exists()


def test_only_the_datasets_own_classes_are_stubbed(tmp_path):
    script = load_script()
    data = reference_pickle("eth3d", _samples())
    samples = script.read_reference_pickle(data, "eth3d")
    assert type(samples[0]).__mro__[1] is script.Stub and samples[0].base == "courtyard"
    with pytest.raises(pickle.UnpicklingError, match=r"refused: .*rmvd\.data\.eth3d\.ETH3DSample"):
        script.read_reference_pickle(data, "dtu")


def test_converted_poses_reproject_like_the_world_cameras(tmp_path):
    """The pickle holds absolute w2c poses; after conversion p_view = pose @ p_key takes a keyview
    point to where the world cameras see it."""
    script = load_script()
    frames, keyview = (4, 5, 6), 1
    text = script.convert_file(_write(tmp_path, reference_pickle("eth3d", _samples(frames=frames, keyview=keyview))),
                               "eth3d")
    (tmp_path / "eth3d.json").write_text(text)
    sample = load_sample_list(tmp_path / "eth3d.json", {"eth3d": tmp_path}).samples[0]
    assert sample.keyview == keyview
    assert sample.depth == tmp_path / "courtyard/ground_truth_depth/dslr_images/DSC_0005.JPG"
    assert np.array_equal(sample.views[keyview].pose, np.eye(4))
    p_key = 3.5 * np.linalg.inv(FIXTURE_K) @ np.array([2.0, 7.0, 1.0])
    world = np.linalg.inv(frame_w2c(frames[keyview])) @ np.append(p_key, 1.0)
    for view, frame in zip(sample.views, frames):
        p_view = view.pose @ np.append(p_key, 1.0)
        np.testing.assert_allclose(p_view, frame_w2c(frame) @ world, atol=1e-6)
    doc = json.loads(text)
    assert doc["format"] == "eth3d" and doc["root"] is None and doc["source"]["license"] == "Apache-2.0"


def test_repeated_names_get_a_suffix_and_scannet_sizes_are_kept(tmp_path):
    script = load_script()
    specs = _samples(names=("scene0000_00_frame-000002",) * 3)
    for spec in specs:
        spec["data"]["images"] = [(p, 480, 640) for p in spec["data"]["images"]]
    doc = json.loads(script.convert_file(_write(tmp_path, reference_pickle("scannet", specs)), "scannet"))
    assert [s["name"] for s in doc["samples"]] == ["scene0000_00_frame-000002", "scene0000_00_frame-000002_2",
                                                   "scene0000_00_frame-000002_3"]
    assert doc["samples"][0]["views"][0]["image_size"] == [480, 640]


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "list.pickle"
    path.write_bytes(data)
    return path
