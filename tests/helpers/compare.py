"""Evaluation folders written by hand with known numbers, for `depthpe compare` and its report."""

import csv
import json
from pathlib import Path

from tests.helpers.training import MICRO_MODEL

GROUPS = ("rope", "prope")
SEEDS = (0, 1, 2)
SCENES = [f"val_{i:06d}" for i in range(5)]
IMAGES = 2
ROWS = ("native", "scene_aligned", "image_aligned", "global_constant", "scene_constant")
METRICS = ("abs_rel", "delta1", "delta2", "delta3", "rmse", "log_rmse")
MANIFEST = {f"synth/{s}": [0, 2, 3] for s in SCENES}


def write_run(root, name, *, seed, config=None, summary, images, manifest=MANIFEST, eval_name="eval"):
    """A run folder ``root/name`` with config.yaml and an ``eval_name`` evaluation folder:
    ``summary``: {row: {metric: value}}; ``images``: {scene: [native abs_rel per image]}."""
    from depthpe.run import RunConfig, save_run_config

    run = root / name
    cfg = {"output_dir": str(run), "seed": seed, "model": {**MICRO_MODEL, "global_pe": "rope"}}
    for key, value in (config or {}).items():
        section, _, field = key.partition(".")
        cfg.setdefault(section, {})[field] = value
    run.mkdir(parents=True)
    save_run_config(RunConfig.from_dict(cfg), run / "config.yaml")
    out = run / eval_name
    out.mkdir()
    rows = {r: {**{m: 0.5 for m in METRICS}, **summary.get(r, {}), "n_scenes": len(images), "n_images": 2 * len(images)}
            for r in ROWS}
    meta = {"model": str(run / "final"), "views": 3, "seed": 0, "global_pe": cfg["model"]["global_pe"]}
    (out / "summary.json").write_text(json.dumps({"meta": meta, "summary": {"synth": rows}, "failures": []}))
    (out / "manifest.json").write_text(json.dumps({"seed": 0, "views": 3, "scenes": manifest}))
    with open(out / "metrics_per_image.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["dataset", "scene", "image", "mode", "abs_rel", "delta1", "n_valid"])
        writer.writeheader()
        for scene, values in images.items():
            for i, value in enumerate(values):
                writer.writerow({"dataset": "synth", "scene": scene, "image": i, "mode": "native",
                                 "abs_rel": value, "delta1": 0.5, "n_valid": 100})
                writer.writerow({"dataset": "synth", "scene": scene, "image": i, "mode": "scene_aligned",
                                 "abs_rel": 9.0, "delta1": 0.5, "n_valid": 100})
            writer.writerow({"dataset": "synth", "scene": scene, "image": IMAGES, "mode": "native",
                             "abs_rel": "nan", "delta1": "nan", "n_valid": 0})  # an empty image: left out
    return run


def write_rmvd_run(root, name, *, seed, global_pe, abs_rel, capsys=None):
    """A run folder ``root/name`` (config.yaml with ``seed`` and ``global_pe``) with the output folder
    ``rmvd/`` of ``depthpe rmvd`` written by its own writer (``harness.publish``): ``abs_rel``:
    {(dataset, setting): [AbsRel per sample]}, inliers = 100 - AbsRel; meta.model = run/final."""
    from depthpe.rmvd.harness import publish
    from depthpe.run import RunConfig, save_run_config

    run = root / name
    run.mkdir(parents=True)
    cfg = {"output_dir": str(run), "seed": seed, "model": {**MICRO_MODEL, "global_pe": global_pe}}
    save_run_config(RunConfig.from_dict(cfg), run / "config.yaml")
    rows = [{"dataset": dataset, "sample": f"s{i}", "setting": setting, "ordering": "index_distance", "views": "0 1",
             "abs_rel": value, "inliers": 100.0 - value, "scale": 1.0}
            for (dataset, setting), values in abs_rel.items() for i, value in enumerate(values)]
    publish(run / "rmvd", rows, {"model": str(run / "final"), "global_pe": global_pe})
    if capsys is not None:
        capsys.readouterr()  # the table publish printed
    return run / "rmvd"


def edit_summary(folder, change) -> None:
    """Rewrite ``folder/summary.json`` after ``change(doc)`` edits its parsed document in place."""
    path = Path(folder) / "summary.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def scene_means(numbers, pe) -> dict[str, float]:
    """{scene: native AbsRel} of group ``pe`` of the ``study`` fixture's numbers, pooled as compare
    pools them: per seed the mean over the scene's images, then the mean over the seeds."""
    import numpy as np

    return {sc: float(np.mean([float(np.mean(numbers[(pe, s)]["images"][sc])) for s in SEEDS])) for sc in SCENES}
