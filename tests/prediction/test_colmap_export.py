"""depthpe.prediction.colmap_export on a hand-made cloud: every 2D point, track and pose that the writer
puts in a COLMAP model is read back by pycolmap as written, in both formats (COLMAP's pixel centres
at +0.5)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from depthpe.geometry import axis_angle_rotation
from depthpe.prediction.colmap_export import colmap_images, write_colmap_model
from depthpe.prediction.result import FusedPoints
from tests.helpers.optional import import_pycolmap

pycolmap = import_pycolmap()

H, W = 6, 8


def _frames():
    R = axis_angle_rotation(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64), 0.3).numpy()
    K = np.array([[10.0, 0, 3.5], [0, 11.0, 2.5], [0, 0, 1]])
    w2c = [np.c_[np.eye(3), [0.0, 0.0, 0.0]], np.c_[R, [-0.5, 0.1, 0.2]]]
    return [SimpleNamespace(K=K, w2c=p, depth=np.zeros((H, W))) for p in w2c]


def _cloud():
    # point 0 from frame 0 at pixel (2, 1), seen by frame 1 at (4.25, 3.5); point 1 from frame 1 at (0, 0)
    # (the top-left pixel centre), seen by frame 0 at (7.75, 5.0); point 2 only in frame 0, at (7, 5)
    return FusedPoints(points=np.array([[0.1, 0.2, 3.0], [-0.4, 0.3, 2.0], [1.0, 1.0, 4.0]]),
                       colors=np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8),
                       frame=np.array([0, 1, 0]),
                       obs_frame=np.array([0, 1, 1, 0, 0]), obs_point=np.array([0, 0, 1, 1, 2]),
                       obs_uv=np.array([[2.0, 1.0], [4.25, 3.5], [0.0, 0.0], [7.75, 5.0], [7.0, 5.0]]))


@pytest.mark.parametrize("fmt", ["bin", "txt"])
def test_points_tracks_and_poses_read_back_as_written(tmp_path, fmt):
    frames, cloud = _frames(), _cloud()
    images, tracks = colmap_images(frames, ["a.png", "b.png"], cloud)
    rec = pycolmap.Reconstruction(str(write_colmap_model(tmp_path, images, cloud, tracks, fmt=fmt)))
    assert sorted(rec.images) == [1, 2] and sorted(rec.points3D) == [1, 2, 3]
    by_name = {im.name: im for im in rec.images.values()}
    for name, frame in (("a.png", 0), ("b.png", 1)):
        im = by_name[name]
        seen = cloud.obs_frame == frame
        got = sorted((tuple(p.xy), p.point3D_id) for p in im.points2D)
        want = sorted((tuple(uv + 0.5), int(pid) + 1) for uv, pid in zip(cloud.obs_uv[seen], cloud.obs_point[seen]))
        assert got == want, name
        np.testing.assert_allclose(im.cam_from_world().matrix(), frames[frame].w2c, atol=1e-12)
    for pid, point in rec.points3D.items():
        np.testing.assert_array_equal(point.xyz, cloud.points[pid - 1])
        np.testing.assert_array_equal(point.color, cloud.colors[pid - 1])
        track = sorted((el.image_id, el.point2D_idx) for el in point.track.elements)
        assert [image_id for image_id, _ in track] == sorted(cloud.obs_frame[cloud.obs_point == pid - 1] + 1)
        for image_id, idx in track:
            assert rec.images[image_id].points2D[idx].point3D_id == pid
    cam = rec.cameras[1]
    assert cam.model.name == "PINHOLE" and (cam.width, cam.height) == (W, H)
    np.testing.assert_allclose(cam.params, [10.0, 11.0, 4.0, 3.0])
