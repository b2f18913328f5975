#!/usr/bin/env python3
"""Convert the official RMVD sample lists (the reference code's pickles) to depthpe's JSON, once,
offline. The outputs are shipped in ``depthpe/rmvd/lists/``; nothing is unpickled at run time.

    git clone https://github.com/lmb-freiburg/robustmvd
    git -C robustmvd checkout 627dffe74132670c115a3a249682e6a3f079f20f
    PYTHONPATH=. python scripts/convert_rmvd_sample_lists.py robustmvd/rmvd/data/sample_lists \\
        --out depthpe/rmvd/lists

Source: https://github.com/lmb-freiburg/robustmvd (Schröppel et al., "A Benchmark and a Baseline
for Robust Multi-view Depth Estimation", 3DV 2022), commit ``SOURCE_COMMIT``, files
``rmvd/data/sample_lists/<dataset>.robustmvd.mvd.pickle``, licence Apache-2.0. Each JSON records
this in its ``"source"`` entry, with the pickle's SHA-256 and what the conversion changed.

**No code of theirs runs.** The pickles hold instances of the reference's own classes
(``rmvd.data.kitti.KITTISample``, ``KITTIImage``, ``KITTIDepth``, and so on per dataset) and numpy
arrays. ``StubUnpickler`` maps exactly those three classes of the dataset being read to plain
attribute records (``Stub``: no methods of theirs), allows numpy's own array reconstruction
(``numpy.core.multiarray._reconstruct``, ``numpy.ndarray``, ``numpy.dtype``), and refuses every
other global (``os.system``, ``builtins.eval``, another dataset's classes, ...) with an
``UnpicklingError`` before anything is called.

**What the pickles store, and the conversion.** Per sample: ``name``, for all but KITTI a ``base``
folder the paths are relative to (the scene), and ``data`` with ``images`` (path records; ScanNet's
also ``height``, ``width``: the size the reference resizes the image to, which its K is for),
``depth`` (a path record), ``intrinsics`` (3 x 3 float32, pixels), ``poses`` (4 x 4 float32) and
``keyview_idx`` (DTU also ``depth_range``, metres). The poses are *absolute* world-to-camera
transforms, ``p_view = pose @ p_world``: the reference's loader (``rmvd/data/dataset.py``,
``_preprocess_sample``) turns them into view_to_key ones as ``pose_i @ inv(pose_key)``, and so does
this script (the keyview's pose becomes the identity exactly). Checked on the data: ScanNet's
camera centres ``-R^T t`` lie 1.36-1.41 m above its floor (z up), and in 1854 of KITTI's 1860
source views the views after the keyview have their centres ahead of it (z > 0 in keyview
coordinates), the views before it behind. The JSON keeps the pickle's view order and keyview
index, the paths joined to ``base`` and relative to the dataset's native root (``"root": null``:
given as ``--data-root DATASET=DIR``), K as stored (float32 values written exactly) and the
relative poses to 9 significant digits. Sample names must be unique in depthpe (predictions are
found by name); the ScanNet pickle has two keyframes twice (other source views each time), so a
repeated name gets ``_2`` on its second sample.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import pickle
import posixpath
import sys
from pathlib import Path

import numpy as np

SOURCE_REPOSITORY = "https://github.com/lmb-freiburg/robustmvd"
SOURCE_COMMIT = "627dffe74132670c115a3a249682e6a3f079f20f"
SOURCE_PATH = "rmvd/data/sample_lists/{dataset}.robustmvd.mvd.pickle"
LICENSE = "Apache-2.0"
CHANGES = ("converted from the pickle to JSON by depthpe's scripts/convert_rmvd_sample_lists.py: each sample's "
           "base folder joined into its paths; poses made relative to the keyview (pose_i @ inv(pose_key), as the "
           "reference's loader does); a name that repeats gets _2, _3, ... on its later samples")

# dataset -> (the reference's module, the prefix of its classes); each pickle may use only its own three
REFERENCE_CLASSES = {"kitti": ("rmvd.data.kitti", "KITTI"), "scannet": ("rmvd.data.scannet", "ScanNet"),
                     "eth3d": ("rmvd.data.eth3d", "ETH3D"), "dtu": ("rmvd.data.dtu", "DTU"),
                     "tanks_and_temples": ("rmvd.data.tanks_and_temples", "TanksAndTemples")}
NUMPY_GLOBALS = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                 ("numpy", "ndarray"), ("numpy", "dtype")}
SAMPLE_KEYS = {"images", "depth", "intrinsics", "poses", "keyview_idx"}
OPTIONAL_SAMPLE_KEYS = {"depth_range"}
POSE_DIGITS = 9  # significant digits of the relative poses (the pickle's are float32: about 7)


class Stub:
    """A plain record standing in for one of the reference's classes: the pickle's state becomes its
    attributes (``__dict__``); it has no behaviour of theirs."""


class StubUnpickler(pickle.Unpickler):
    """Unpickles one dataset's sample list: its three reference classes become ``Stub`` subclasses,
    numpy's array reconstruction is allowed, every other global is refused (module docstring)."""

    def __init__(self, file, dataset: str):
        super().__init__(file)
        module, prefix = REFERENCE_CLASSES[dataset]
        self._stubs = {(module, prefix + kind): type(prefix + kind, (Stub,), {"__module__": "stub." + module})
                       for kind in ("Sample", "Image", "Depth")}

    def find_class(self, module: str, name: str):
        if (module, name) in self._stubs:
            return self._stubs[(module, name)]
        if (module, name) in NUMPY_GLOBALS:
            return getattr(importlib.import_module(module), name)
        raise pickle.UnpicklingError(f"refused: the pickle asks for the global {module}.{name}, which is neither a "
                                     f"sample class of the reference nor numpy's array reconstruction")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refused: the pickle uses persistent ids")


def read_reference_pickle(data: bytes, dataset: str) -> list:
    """The samples (``Stub`` records) of one official pickle's bytes; a pickle that asks for any other
    global is refused with ``pickle.UnpicklingError``, before anything of it is called."""
    import io

    samples = StubUnpickler(io.BytesIO(data), dataset).load()
    if not isinstance(samples, list) or not all(isinstance(s, Stub) for s in samples):
        raise ValueError(f"the {dataset} pickle must hold a list of sample records")
    return samples


def _rigid_inverse(T: np.ndarray) -> np.ndarray:
    """inv of a rigid 4 x 4 [[R, t], [0, 0, 0, 1]]: [[R^T, -R^T t], [0, 0, 0, 1]] (float64)."""
    out = np.eye(4)
    out[:3, :3] = T[:3, :3].T
    out[:3, 3] = -T[:3, :3].T @ T[:3, 3]
    return out


def relative_poses(poses: list, keyview: int) -> list[np.ndarray]:
    """The reference's absolute world-to-camera poses -> view_to_key ones, ``pose_i @ inv(pose_key)``
    (``p_view = pose @ p_key``), float64; the keyview's is the identity exactly."""
    absolute = [np.asarray(p, dtype=np.float64) for p in poses]
    to_key = _rigid_inverse(absolute[keyview])
    rel = [p @ to_key for p in absolute]
    rel[keyview] = np.eye(4)
    return rel


def _root_relative(base: str, path: str) -> str:
    """``base/path`` as a POSIX path inside the dataset's root (no absolute path, no ``..``)."""
    joined = posixpath.normpath(posixpath.join(base, path)) if base else posixpath.normpath(path)
    if joined.startswith(("/", "../")) or joined == "..":
        raise ValueError(f"the path {joined!r} leaves the dataset's root")
    return joined


def _float32_list(matrix) -> list:
    """A float32 matrix as nested lists of the shortest decimals that give the same float32 back."""
    return [[float(str(np.float32(v))) for v in row] for row in np.asarray(matrix, dtype=np.float32)]


def _pose_list(pose: np.ndarray) -> list:
    return [[float(f"{v:.{POSE_DIGITS}g}") + 0.0 for v in row] for row in pose]


def convert_sample(sample: Stub) -> dict:
    """One pickled sample -> its JSON entry (module docstring: paths, K, poses, keyview)."""
    data, base = sample.data, getattr(sample, "base", "")
    keys = set(data)
    if not SAMPLE_KEYS <= keys <= SAMPLE_KEYS | OPTIONAL_SAMPLE_KEYS:
        raise ValueError(f"sample {sample.name}: unexpected keys {sorted(keys)}")
    keyview = int(data["keyview_idx"])
    images, Ks, poses = data["images"], data["intrinsics"], data["poses"]
    if not len(images) == len(Ks) == len(poses) or not 0 <= keyview < len(images):
        raise ValueError(f"sample {sample.name}: {len(images)} images, {len(Ks)} K, {len(poses)} poses, "
                         f"keyview {keyview}")
    views = []
    for image, K, pose in zip(images, Ks, relative_poses(poses, keyview)):
        view = {"image": _root_relative(base, image.path), "K": _float32_list(K), "pose": _pose_list(pose)}
        if hasattr(image, "height"):
            view["image_size"] = [int(image.height), int(image.width)]
        views.append(view)
    entry = {"name": str(sample.name), "keyview": keyview, "depth": _root_relative(base, data["depth"].path),
             "views": views}
    if "depth_range" in data:
        entry["depth_range"] = [float(v) for v in data["depth_range"]]
    return entry


def unique_names(entries: list[dict]) -> list[dict]:
    """``entries`` with each repeated name made unique: its second sample gets ``_2``, the third
    ``_3`` (the ScanNet list has two keyframes twice, each time with other source views)."""
    seen: dict[str, int] = {}
    for entry in entries:
        name = entry["name"]
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            entry["name"] = f"{name}_{seen[name]}"
    if len({e["name"] for e in entries}) != len(entries):
        raise ValueError("the renamed sample names still repeat")
    return entries


def sample_list_document(dataset: str, samples: list, pickle_sha256: str, commit: str = SOURCE_COMMIT) -> dict:
    """The JSON document of one dataset: ``format`` = its native encoding, ``"root": null`` (given
    as ``--data-root``), the ``source`` record and the converted samples."""
    source = {"repository": SOURCE_REPOSITORY, "commit": commit, "path": SOURCE_PATH.format(dataset=dataset),
              "sha256": pickle_sha256, "license": LICENSE, "changes": CHANGES}
    return {"dataset": dataset, "format": dataset, "root": None, "source": source,
            "samples": unique_names([convert_sample(s) for s in samples])}


def document_text(doc: dict) -> str:
    """``doc`` as JSON text with one sample per line (diff-friendly); parses back to ``doc``."""
    head = {k: v for k, v in doc.items() if k != "samples"}
    lines = ["{" + ",\n ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()) + ",",
             ' "samples": [']
    lines += ["  " + json.dumps(s, separators=(",", ":")) + "," for s in doc["samples"]]
    lines[-1] = lines[-1].rstrip(",")
    text = "\n".join(lines) + "]}\n"
    assert json.loads(text) == doc
    return text


def convert_file(pickle_path: Path, dataset: str, commit: str = SOURCE_COMMIT) -> str:
    """The JSON text of the official pickle at ``pickle_path`` (of ``dataset``)."""
    data = pickle_path.read_bytes()
    samples = read_reference_pickle(data, dataset)
    return document_text(sample_list_document(dataset, samples, hashlib.sha256(data).hexdigest(), commit))


def check_outputs(out: Path) -> None:
    """Read every written list back through depthpe's loader and compare with the official counts."""
    from depthpe.rmvd.official import OFFICIAL_LISTS
    from depthpe.rmvd.samples import load_sample_list

    for dataset, (count, views) in OFFICIAL_LISTS.items():
        sl = load_sample_list(out / f"{dataset}.json", {dataset: out})
        seen = {len(s.views) for s in sl.samples}
        if len(sl.samples) != count or seen != {views}:
            raise SystemExit(f"{dataset}: {len(sl.samples)} samples with {sorted(seen)} views, "
                             f"expected {count} x {views}")
        print(f"{dataset}: {count} samples, {views} views each")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pickles", type=Path, help="the reference's rmvd/data/sample_lists folder")
    parser.add_argument("--out", type=Path, default=Path("depthpe/rmvd/lists"), help="where the JSON lists go")
    parser.add_argument("--commit", default=SOURCE_COMMIT, help="the reference commit the pickles are from")
    args = parser.parse_args(argv)
    from depthpe.files import atomic_write_bytes

    for dataset in REFERENCE_CLASSES:
        text = convert_file(args.pickles / Path(SOURCE_PATH.format(dataset=dataset)).name, dataset, args.commit)
        atomic_write_bytes(args.out / f"{dataset}.json", text.encode("utf-8"))
    check_outputs(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
