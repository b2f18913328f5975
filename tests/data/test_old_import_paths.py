"""`depthpe.data.X`, the import paths of the last release, resolve to the moved modules (the very
same module objects) with a DeprecationWarning naming the new path, and leave the moved modules as
they were. Run in a fresh interpreter: the import hook's effects are per process."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import importlib, json, warnings
import depthpe.data
from depthpe.data import MOVED
out = {"same": {}, "messages": [], "specs": {}}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import depthpe.data.sampling as old_sampling
    from depthpe.data.convert import co3d as old_co3d
    import depthpe.data.format.scene_file as old_scene_file
import depthpe.loader.sampling, depthpe.scenes.convert.co3d, depthpe.scenes.format.scene_file
out["same"] = {"sampling": old_sampling is depthpe.loader.sampling,
               "co3d": old_co3d is depthpe.scenes.convert.co3d,
               "scene_file": old_scene_file is depthpe.scenes.format.scene_file}
out["messages"] = [(str(w.message), w.category.__name__, w.filename) for w in caught]
out["specs"] = {m.__name__: m.__spec__.name for m in (old_sampling, old_co3d, old_scene_file)}
before = depthpe.loader.sampling.sample_key
importlib.reload(depthpe.loader.sampling)
out["reloaded"] = depthpe.loader.sampling.sample_key is not before
try:
    import depthpe.data.nope
except ModuleNotFoundError as err:
    out["unknown"] = str(err)
out["moved"] = sorted(MOVED)
print(json.dumps(out))
"""


def _run() -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_old_paths_are_the_moved_modules_with_a_warning_and_leave_them_intact():
    out = _run()
    assert out["same"] == {"sampling": True, "co3d": True, "scene_file": True}
    assert [m[0] for m in out["messages"]] == [
        "depthpe.data.sampling moved to depthpe.loader.sampling; the old name goes away in the next release",
        "depthpe.data.convert moved to depthpe.scenes.convert; the old name goes away in the next release",
        "depthpe.data.format moved to depthpe.scenes.format; the old name goes away in the next release",
        "depthpe.data.format.scene_file moved to depthpe.scenes.format.scene_file; the old name goes away "
        "in the next release"]
    assert {m[1] for m in out["messages"]} == {"DeprecationWarning"}
    assert {m[2] for m in out["messages"]} == {"<string>"}  # points at the importing line, not the hook
    assert out["specs"] == {name: name for name in out["specs"]}  # each keeps its own __spec__
    assert out["reloaded"]  # so importlib.reload of a moved module still reloads it
    assert out["unknown"] == "No module named 'depthpe.data.nope'"
    assert out["moved"] == ["augment", "batching", "cameras", "config", "convert", "datasets", "format", "loaders",
                            "parallel", "samples", "sampling", "scenes", "synth", "synth_config",
                            "transforms_json", "workers"]
