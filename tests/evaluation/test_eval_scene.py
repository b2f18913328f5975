"""``depthpe.evaluation.scene``: one held-out scene predicted as the evaluation predicts it, checked
against its scene file (the images resized to the evaluation's width, K scaled with them, the cameras
in the normalized frame of view 0), the first scene by default, and dtype reaching the model."""

from __future__ import annotations

import re

import cv2
import numpy as np
import pytest

from depthpe.evaluation.scene import EvalSceneSpec, held_out_of_spec, predict_eval_scene, predict_held_out_scene
from depthpe.model import DepthModel
from depthpe.scenes.format.scene_file import SceneReader

WIDTH = 42  # the synthetic scenes are 56 x 56


def _spec(saved_model, synth_root, **kw) -> EvalSceneSpec:
    return EvalSceneSpec(model=str(saved_model), data=str(synth_root), views=3, image_width=WIDTH, **kw)


def _from_view0(R: np.ndarray) -> np.ndarray:
    """(S, 3, 3) world-to-camera rotations -> the rotation of each view relative to view 0."""
    return np.einsum("sij,kj->sik", R, R[0])


def test_the_predicted_scene_holds_its_files_images_and_cameras(saved_model, synth_root):
    got = predict_eval_scene(_spec(saved_model, synth_root, scene="val_000001"))
    reader = SceneReader(synth_root / "synth" / "val" / "val_000001.h5")
    K, w2c = reader.read_cameras()
    K, w2c = K[got.frames], w2c[got.frames]
    s = WIDTH / reader.width
    assert got.images.dtype == np.uint8 and got.images.shape == (3, WIDTH, WIDTH, 3)
    for image, frame in zip(got.images, got.frames):  # the input the model saw, as RGB uint8
        resized = cv2.resize(reader.read_image(frame), (WIDTH, WIDTH), interpolation=cv2.INTER_AREA)
        difference = np.abs(image.astype(int) - resized.astype(int))  # shrinking is INTER_AREA (loader.augment)
        assert difference.max() <= 1 and difference.mean() < 0.1
    np.testing.assert_allclose(got.K[:, [0, 1], [0, 1]], K[:, [0, 1], [0, 1]] * s, rtol=1e-5)
    np.testing.assert_allclose(got.K[:, :2, 2], (K[:, :2, 2] + 0.5) * s - 0.5, rtol=1e-5)  # pixel centres
    assert got.w2c.shape == (3, 3, 4)
    np.testing.assert_allclose(got.w2c[0], np.eye(3, 4), atol=1e-6)  # view 0 is the frame
    np.testing.assert_allclose(_from_view0(got.w2c[:, :, :3]), _from_view0(w2c[:, :, :3]), atol=1e-5)
    assert got.depth.shape == got.gt.shape == (3, WIDTH, WIDTH) and (got.gt > 0).any()
    assert got.conf is not None and got.conf.shape == got.depth.shape and (got.conf >= 1).all()


def test_without_a_scene_the_first_one_is_predicted_and_a_wrong_name_lists_the_scenes(saved_model, synth_root):
    held_out = held_out_of_spec(_spec(saved_model, synth_root))
    model = DepthModel.from_pretrained(str(saved_model)).eval()
    assert predict_held_out_scene(held_out, None, model).scene == "val_000000"
    assert predict_held_out_scene(held_out, "synth/val_000001", model).scene == "val_000001"
    listed = "no scene named 'val_9'; pass one of: synth/val_000000, synth/val_000001"
    with pytest.raises(ValueError, match=re.escape(listed)):
        predict_held_out_scene(held_out, "val_9", model)


def test_the_dtype_reaches_the_model(saved_model, synth_root):
    fp32, bf16 = (predict_eval_scene(_spec(saved_model, synth_root, dtype=d)) for d in ("fp32", "bf16"))
    assert bf16.frames == fp32.frames and not np.array_equal(bf16.depth, fp32.depth)
    np.testing.assert_allclose(bf16.depth, fp32.depth, rtol=0.05)  # bfloat16 rounding, the same prediction
