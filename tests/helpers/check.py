"""`depthpe check` test helpers: a scene file written from a synthetic plane scene, the command run in process."""

import argparse

from depthpe.commands import check as check_cmd
from depthpe.scenes.format.scene_file import write_scene
from tests.helpers.scenes import plane_scene


def write(split_dir, name, sc=None, **overrides):
    """``split_dir/name.h5`` from ``sc`` (default: a 4-view 30 x 40 plane scene); ``overrides``: write_scene keywords."""
    sc = sc or plane_scene(4, 30, 40, seed=1)
    kw = dict(images=sc["images"], depth=sc["depth"], K=sc["K"], w2c=sc["w2c"], dataset="toy",
              scene_id=name, split="train", metric=False, depth_units="scene")
    kw.update(overrides)
    return write_scene(split_dir / f"{name}.h5", **kw)


def run_cli(argv):
    """`depthpe check ARGV` in this process; returns its exit status."""
    p = argparse.ArgumentParser()
    check_cmd.add_arguments(p)
    return check_cmd.run(p.parse_args(argv))
