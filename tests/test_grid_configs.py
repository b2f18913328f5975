"""The shipped DPPE paper grid (depthpe/configs/grid/): ``--config grid/NAME`` loads each cell with the
encoding its name says; together they cover Table 1 (qk x vo in {none, 2d, p, p2d}) and Table 3
(vo in {KRt, Rt, KR, Kt, K, R, t, none} with qk p2d)."""

from __future__ import annotations

import pytest

from depthpe.config import ConfigError
from depthpe.run.loading import load_run_config, shipped_config_names, shipped_group_config_names


def test_every_grid_config_loads_with_the_pair_its_name_says():
    names = shipped_group_config_names("grid")
    pairs = set()
    for name in names:
        cfg = load_run_config(name)
        mc = cfg.model_config()
        if name == "grid/plucker_rope":
            assert mc.plucker and mc.global_pe == "rope"
            continue
        qk, vo = (part.split("-", 1)[1] for part in name.removeprefix("grid/").split("_"))
        assert mc.global_pe == {"qk": qk, "vo": vo} and not mc.plucker, name
        assert cfg.output_dir == f"runs/{name}" and mc.embed_dim == 1024, name
        pairs.add((qk, vo))
    table1 = {(qk, vo) for qk in ("none", "2d", "p", "p2d") for vo in ("none", "2d", "p", "p2d")}
    table3 = {("p2d", vo) for vo in ("p2d", "Rt2d", "KR2d", "Kt2d", "K2d", "R2d", "t2d", "2d")}
    assert pairs == table1 | table3 and len(names) == 23
    assert not any(n.startswith("grid") for n in shipped_config_names())


def test_grid_names_are_resolved_only_inside_the_shipped_folder():
    with pytest.raises(ConfigError, match=r"no shipped config of that name.*grid/NAME: 23 configs"):
        load_run_config("grid/qk-x_vo-y")
    with pytest.raises(ConfigError, match="not found"):
        load_run_config("accelerate/ddp")  # only the grid folder holds run configs
    cfg = load_run_config("grid/qk-p2d_vo-KR2d", ["train.steps=3"])
    assert cfg.train.steps == 3
