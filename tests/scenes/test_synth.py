"""Procedural scenes (depthpe.scenes.synth, `depthpe synth`, `depthpe bench synth`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from depthpe.scenes import synth
from depthpe.scenes.synth import (
    Primitive,
    Scene,
    Texture,
    cast_rays,
    free_space_clearance,
    generate_scene,
    intrinsics_from_fov,
    look_at_w2c,
    render_view,
    render_views,
    scene_seed,
    surface_distance,
)
from depthpe.geometry import camera_centers, check_rotation, project_points, unproject_depth

V, H, W = 4, 56, 56


@pytest.fixture(scope="module")
def scenes():
    """A few small random scenes (train split, seed 0) shared by the tests of this module."""
    return [generate_scene(scene_seed(0, "train", i), V, H, W) for i in range(3)]


def _texture(seed=0):
    return Texture("checker", np.array([0.9, 0.2, 0.1]), np.array([0.1, 0.3, 0.8]), 0.5, 0.3, seed, 0.2)


def _room(holes=(), primitives=()):
    return Scene(
        room_min=np.array([-5.0, -5.0, 0.0]),
        room_max=np.array([5.0, 5.0, 3.0]),
        face_textures=[_texture(i) for i in range(6)],
        holes=list(holes),
        primitives=list(primitives),
        scale=5.0,
    )


def test_deterministic_for_a_seed():
    a = generate_scene(scene_seed(7, "train", 2), V, H, W)
    b = generate_scene(scene_seed(7, "train", 2), V, H, W)
    for key in ("images", "depth", "K", "w2c"):
        np.testing.assert_array_equal(a[key], b[key])
    c = generate_scene(scene_seed(8, "train", 2), V, H, W)
    assert not np.array_equal(a["w2c"], c["w2c"])


def test_train_and_val_seeds_are_disjoint():
    train = [scene_seed(0, "train", i) for i in range(50)]
    val = [scene_seed(0, "val", i) for i in range(50)]
    states = {tuple(s.generate_state(4)) for s in train + val}
    assert len(states) == 100  # every (split, index) has its own stream
    a = generate_scene(train[0], 2, 16, 16)
    b = generate_scene(val[0], 2, 16, 16)
    size_a = a["scene"].room_max - a["scene"].room_min
    assert not np.allclose(size_a, b["scene"].room_max - b["scene"].room_min)
    with pytest.raises(ValueError, match="unknown split"):
        scene_seed(0, "training", 0)


def test_shapes_dtypes_finite(scenes):
    for out in scenes:
        assert out["images"].shape == (V, H, W, 3) and out["images"].dtype == np.uint8
        assert out["depth"].shape == (V, H, W) and out["depth"].dtype == np.float32
        assert out["K"].shape == (V, 3, 3) and out["w2c"].shape == (V, 3, 4)
        assert np.isfinite(out["depth"]).all() and (out["depth"] >= 0).all()
        assert (out["depth"] > 0).mean() > 0.5  # mostly geometry
        assert out["images"].std() > 5  # not a flat image
        K = out["K"]
        hfov = np.degrees(2 * np.arctan(W / 2 / K[:, 0, 0]))
        assert ((hfov > 43) & (hfov < 73)).all()
        np.testing.assert_allclose(K[:, 0, 0], K[:, 1, 1])
        assert (np.abs(K[:, 0, 2] - (W - 1) / 2) <= 0.02 * W + 1e-9).all()
        assert (np.abs(K[:, 1, 2] - (H - 1) / 2) <= 0.02 * H + 1e-9).all()


def test_rotations_orthonormal(scenes):
    for out in scenes:
        w2c = torch.from_numpy(out["w2c"])
        check_rotation(w2c, atol=1e-9)
        R = out["w2c"][:, :, :3]
        np.testing.assert_allclose(R @ R.transpose(0, 2, 1), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)


def test_cameras_inside_room_and_outside_primitives(scenes):
    for out in scenes:
        scene = out["scene"]
        c = camera_centers(torch.from_numpy(out["w2c"])).numpy()
        assert ((c > scene.room_min) & (c < scene.room_max)).all()
        for prim in scene.primitives:  # independent check with the bounding sphere of spheres
            if prim.kind == "sphere":
                assert (np.linalg.norm(c - prim.center, axis=1) > prim.size[0]).all()
        assert (free_space_clearance(scene, c) >= 0.04 * scene.scale - 1e-9).all()


def test_unprojected_depth_lies_on_surfaces(scenes):
    for out in scenes:
        scene = out["scene"]
        depth = torch.from_numpy(out["depth"]).double()
        pts = unproject_depth(depth, torch.from_numpy(out["K"]), torch.from_numpy(out["w2c"]))
        valid = out["depth"] > 0
        dist = surface_distance(scene, pts.numpy()[valid])
        assert dist.max() < 1e-5 * scene.scale, dist.max()


def _bilinear_inverse_depth(depth: np.ndarray, uv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth at sub-pixel uv (N, 2) by bilinear interpolation of 1/depth -> (depth (N,), ok (N,))."""
    h, w = depth.shape
    u0 = np.clip(np.floor(uv[:, 0]).astype(int), 0, w - 2)
    v0 = np.clip(np.floor(uv[:, 1]).astype(int), 0, h - 2)
    fu, fv = uv[:, 0] - u0, uv[:, 1] - v0
    corners = np.stack([depth[v0, u0], depth[v0, u0 + 1], depth[v0 + 1, u0], depth[v0 + 1, u0 + 1]], 1)
    ok = (corners > 0).all(1) & (fu >= 0) & (fu <= 1) & (fv >= 0) & (fv <= 1)
    inv = 1 / np.where(corners > 0, corners, 1).astype(np.float64)
    weights = np.stack([(1 - fu) * (1 - fv), fu * (1 - fv), (1 - fu) * fv, fu * fv], 1)
    return 1 / (inv * weights).sum(1), ok


def test_multiview_consistency(scenes):
    """Valid depth of view i, projected into view j, agrees with depth_j where it is visible."""
    errors, exact = [], []
    for out in scenes:
        depth = torch.from_numpy(out["depth"]).double()
        K, w2c = torch.from_numpy(out["K"]), torch.from_numpy(out["w2c"])
        pts = unproject_depth(depth, K, w2c)
        for i in range(V):
            valid = depth[i] > 0
            X = pts[i][valid]
            for j in range(V):
                if i == j:
                    continue
                uv, z = project_points(X, K[j], w2c[j])
                ui, vi = uv[:, 0].round().long(), uv[:, 1].round().long()
                inside = (z > 0) & (ui >= 0) & (ui < W) & (vi >= 0) & (vi < H)
                if inside.sum() < 20:
                    continue
                # (1) exact: cast a ray of camera j through the sub-pixel projection.
                uvs = uv[inside].numpy()
                Kj, Rj = K[j].numpy(), w2c[j, :, :3].numpy()
                d_cam = np.stack([(uvs[:, 0] - Kj[0, 2]) / Kj[0, 0], (uvs[:, 1] - Kj[1, 2]) / Kj[1, 1],
                                  np.ones(len(uvs))], axis=1)
                D = d_cam @ Rj
                O = np.broadcast_to(camera_centers(w2c[j]).numpy(), D.shape)
                t, _ = cast_rays(out["scene"], O, D)
                rel = np.abs(t - z[inside].numpy()) / z[inside].numpy()
                exact.append(np.mean(rel < 1e-5))  # visible points agree to float32 precision
                # (2) against the rendered depth map of view j, bilinear in inverse depth (exact
                # for planes) where the four neighbouring pixels are valid.
                dj, ok = _bilinear_inverse_depth(out["depth"][j], uvs)
                zj = z[inside].numpy()
                errors.append(np.median(np.abs(dj[ok] - zj[ok]) / zj[ok]))
    assert len(errors) >= 6
    assert np.median(errors) < 1e-4  # `depthpe check` requires < 0.5%; exact rendering gives ~1e-7
    assert np.median(exact) > 0.5  # most reprojected points are visible and agree exactly


def test_depth_is_zero_exactly_where_rays_escape():
    """Open ceiling: depth is 0 exactly for rays that leave through the ceiling rectangle."""
    scene = _room(holes=[(5, (-6.0, 6.0, -6.0, 6.0))])
    center = np.array([1.0, -0.5, 1.2])
    w2c = look_at_w2c(center, center + np.array([1.0, 0.3, 0.6]))
    K = intrinsics_from_fov(np.deg2rad(70), 40, 48)
    image, depth = render_view(scene, K, w2c, 40, 48)
    v, u = np.mgrid[0:40, 0:48].astype(float)
    d_cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], -1)
    D = d_cam @ w2c[:, :3]
    s = (scene.room_max[2] - center[2]) / D[..., 2]  # hit of the ceiling plane
    P = center + s[..., None] * D
    through_ceiling = (D[..., 2] > 0) & (np.abs(P[..., :2]) <= 5).all(-1)
    assert 0.1 < through_ceiling.mean() < 0.9
    np.testing.assert_array_equal(depth == 0, through_ceiling)
    assert (depth[~through_ceiling] > 0).all()
    sky = image[through_ceiling].astype(float)
    expected = np.rint(scene.sky_horizon * 255)  # sky colours lie between horizon and zenith
    lo = np.minimum(expected, np.rint(scene.sky_zenith * 255)) - 1
    hi = np.maximum(expected, np.rint(scene.sky_zenith * 255)) + 1
    assert ((sky >= lo) & (sky <= hi)).all()


def test_window_gives_sky_inside_a_wall():
    scene = _room(holes=[(1, (-1.0, 1.0, 1.0, 2.0))])  # window in the +x wall
    center = np.array([2.0, 0.0, 1.5])
    w2c = look_at_w2c(center, np.array([5.0, 0.0, 1.5]))
    K = intrinsics_from_fov(np.deg2rad(60), 32, 32)
    _, depth = render_view(scene, K, w2c, 32, 32)
    assert depth[16, 16] == 0  # through the window
    assert depth[0, 0] > 0 and depth[-1, -1] > 0  # wall around it
    assert 0.05 < (depth == 0).mean() < 0.8


def test_primitives_analytic_depth():
    """z-depth (not ray length) of a sphere, an axis-aligned box and a capped cylinder."""
    eye = np.eye(3)
    sphere = Primitive("sphere", np.array([3.0, 0.0, 1.5]), eye, np.full(3, 0.5), _texture())
    box = Primitive("box", np.array([3.0, 2.0, 1.5]), eye, np.array([0.3, 0.4, 0.5]), _texture())
    cyl = Primitive("cylinder", np.array([3.0, -2.0, 1.5]), eye, np.array([0.4, 0.4, 0.6]), _texture())
    scene = _room(primitives=[sphere, box, cyl])
    center = np.array([0.0, 0.0, 1.5])
    w2c = look_at_w2c(center, np.array([1.0, 0.0, 1.5]))  # looking along +x
    K = intrinsics_from_fov(np.deg2rad(90), 65, 65)  # (32, 32) is the centre pixel
    _, depth = render_view(scene, K, w2c, 65, 65)
    assert depth[32, 32] == pytest.approx(2.5, abs=1e-6)  # sphere front at x = 2.5
    f = K[0, 0]
    # box front face at x = 2.7 seen at world y = 2 -> u = cx - f * 2 / 2.7; z-depth is 2.7 there
    u_box = int(round(32 - f * 2.0 / 2.7))
    assert depth[32, u_box] == pytest.approx(2.7, abs=1e-6)
    u_cyl = int(round(32 + f * 2.0 / 2.6))  # cylinder side nearest point x = 2.6 at y = -2
    assert depth[32, u_cyl] == pytest.approx(2.6, abs=2e-2)  # curved: pixel is near the silhouette
    pts = unproject_depth(torch.from_numpy(depth).double(), torch.from_numpy(K), torch.from_numpy(w2c))
    assert surface_distance(scene, pts.numpy()[depth > 0]).max() < 1e-6
    # corner pixel (0, 0) looks up-left and hits the ceiling (1.5 above the camera): its z-depth is
    # 1.5 / (up component of K^-1 [0, 0, 1]) = 1.5 f / cy, about 1.52, while its ray length is about 2.6
    assert depth[0, 0] == pytest.approx(1.5 * f / K[1, 2], rel=1e-6)


def test_render_views_rejects_bad_shapes():
    scene = _room()
    with pytest.raises(ValueError, match="expected K"):
        render_views(scene, np.eye(3), np.zeros((3, 4)), 8, 8)


def _run_cli(tmp_path, *extra):
    from depthpe.cli import main

    return main(["synth", "--out", str(tmp_path), "--train-scenes", "2", "--val-scenes", "1",
                 "--views", "3", "--height", "28", "--width", "28", "--workers", "1", "--quiet", *extra])


def test_cli_writes_files_and_index_and_resumes(tmp_path, capsys):
    from depthpe.scenes.format.check import check_scene
    from depthpe.scenes.format.scene_file import SceneReader, read_index

    assert _run_cli(tmp_path) == 0
    root = tmp_path / "synth"
    expected = {"train": ["train_000000.h5", "train_000001.h5"], "val": ["val_000000.h5"]}
    for split, names in expected.items():
        entries = read_index(root / split)
        assert [e["path"] for e in entries] == names
        for e in entries:
            assert (e["num_frames"], e["height"], e["width"]) == (3, 28, 28)
            assert e["metric"] is False and e["depth_units"] == "scene"
            with SceneReader(root / split / e["path"]) as reader:
                attrs = reader.attrs
                frame = reader.read_frame(1)
            assert attrs["dataset"] == "synth" and attrs["split"] == split
            assert attrs["metric"] == False and attrs["depth_units"] == "scene"  # noqa: E712
            assert attrs["source"] == "depthpe procedural v1"
            assert frame["image"].shape == (28, 28, 3) and frame["depth"].shape == (28, 28)
        doc = json.loads((root / split / "index.json").read_text())
        assert doc["dataset"] == "synth" and doc["split"] == split
    report = check_scene(root / "train" / "train_000000.h5", max_rel_error=0.005)
    assert report.ok, report.problems
    out = capsys.readouterr().out
    assert "3 written" not in out and "2 written" in out

    mtimes = {p: p.stat().st_mtime_ns for p in root.rglob("*.h5")}
    (root / "train" / "train_000001.h5").unlink()
    assert _run_cli(tmp_path) == 0
    out = capsys.readouterr().out
    assert "1 written, 1 skipped" in out  # train: only the deleted scene is redone
    assert "0 written, 1 skipped" in out  # val
    for p, m in mtimes.items():
        if p.name != "train_000001.h5":
            assert p.stat().st_mtime_ns == m
    assert len(read_index(root / "train")) == 2

    # a different seed must not reuse files made with another seed
    assert _run_cli(tmp_path, "--seed", "1") == 0
    assert "2 written, 0 skipped" in capsys.readouterr().out


def test_write_is_deterministic_across_runs_and_workers(tmp_path):
    from depthpe.scenes.format.scene_file import SceneReader, read_index

    kw = dict(train_scenes=2, val_scenes=1, views=2, height=16, width=16, seed=3, progress=False)
    synth.write_synth_dataset(tmp_path / "a", workers=1, **kw)
    summary = synth.write_synth_dataset(tmp_path / "b", workers=2, **kw)
    assert summary["splits"]["train"]["written"] == 2 and summary["splits"]["val"]["written"] == 1
    for split in ("train", "val"):
        assert read_index(tmp_path / "a/synth" / split) == read_index(tmp_path / "b/synth" / split)
        for e in read_index(tmp_path / "a/synth" / split):
            with SceneReader(tmp_path / "a/synth" / split / e["path"]) as ra, \
                    SceneReader(tmp_path / "b/synth" / split / e["path"]) as rb:
                np.testing.assert_array_equal(ra.read_frame(1)["depth"], rb.read_frame(1)["depth"])
                np.testing.assert_array_equal(ra.read_frame(0)["image"], rb.read_frame(0)["image"])
                np.testing.assert_array_equal(ra.read_cameras()[1], rb.read_cameras()[1])


def test_cli_help_explains_every_flag(capsys):
    from depthpe.cli import main

    with pytest.raises(SystemExit):
        main(["synth", "--help"])
    text = capsys.readouterr().out
    for flag in ("--out", "--train-scenes", "--val-scenes", "--views", "--height", "--width",
                 "--seed", "--workers", "--quiet", "--shift"):
        assert flag in text
    assert "140" in text and "resume" in text.lower()


def test_cli_rejects_bad_arguments(tmp_path):
    with pytest.raises(SystemExit, match="--views"):
        _run_cli(tmp_path, "--views", "1")


def _bench_synth(capsys, *argv: str) -> dict[str, str]:
    """Run ``depthpe bench synth`` -> ``{quantity: value}`` of its table."""
    from depthpe.cli import main

    assert main(["bench", "synth", *argv]) == 0
    rows = [line.strip("|").split("|") for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    return {k.strip(): v.strip() for k, v in rows[1:]}  # rows[0]: header


def test_bench_synth_table_is_consistent(capsys):
    from depthpe.bench.synth import REFERENCE_WORK

    table = _bench_synth(capsys, "--scenes", "2", "--views", "3", "--height", "16", "--width", "24",
                         "--target-s", "5000")
    assert table["scenes x views"] == "2 x 3 at 16x24"
    seconds = {k: float(table[k].removesuffix(" s")) for k in
               ("render (sum over scenes)", "write (sum over scenes)", "wall", "CPU (process + workers)")}
    wall, cpu = seconds["wall"], seconds["CPU (process + workers)"]
    half_cent = 0.005  # the seconds are printed with 2 decimals
    # one worker renders and writes the scenes one after another, inside the wall time
    assert seconds["render (sum over scenes)"] + seconds["write (sum over scenes)"] <= wall + 3 * half_cent
    # the target is scaled by the work (scenes x views x pixels) relative to the 64 x 12 x 112 x 112 reference
    target = 5000 * 2 * 3 * 16 * 24 / REFERENCE_WORK
    ratio, rest = table["wall / target"].split(" ", 1)
    assert rest == f"(target {target:.3g} s; < 1 meets it)"
    for printed, value in ((float(ratio), wall / target), (float(table["CPU / target"]), cpu / target)):
        assert abs(printed - value) <= half_cent / target + half_cent
    scenes_s, views_s = float(table["scenes/s"]), float(table["views/s"])
    assert 2 / (wall + half_cent) - half_cent <= scenes_s
    assert wall <= half_cent or scenes_s <= 2 / (wall - half_cent) + half_cent
    assert views_s == pytest.approx(3 * scenes_s, abs=0.05 + 3 * half_cent)  # 3 views per scene


def test_bench_synth_rejects_a_single_view():
    import argparse

    from depthpe.bench.synth import add_arguments, run

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ValueError, match="views must be >= 2 for a multi-view dataset, got 1"):
        run(parser.parse_args(["--scenes", "1", "--views", "1"]))
