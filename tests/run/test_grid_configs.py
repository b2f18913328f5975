"""The shipped DPPE paper grid (depthpe/configs/grid/): ``--config grid/NAME`` loads each cell with the
encoding its name says; together they cover Table 1 (qk x vo in {none, 2d, p, p2d}) and Table 3
(vo in {KRt, Rt, KR, Kt, K, R, t, none} with qk p2d); the URoPE ablations (``urope_*``, docs/encodings.md)
and the Plücker hybrids (``plucker_rope``, ``plucker_urope``)."""

from __future__ import annotations

import pytest

from depthpe.config import ConfigError
from depthpe.run.loading import load_run_config, shipped_config_names, shipped_group_config_names


URoPE_ABLATIONS = {
    "grid/urope_anchors-1": {"num_anchors": 1},
    "grid/urope_anchors-2": {"num_anchors": 2},
    "grid/urope_anchors-4": {"num_anchors": 4},
    "grid/urope_anchors-8": {"num_anchors": 8},
    "grid/urope_spacing-depth": {"anchor_spacing": "depth"},
    "grid/urope_spacing-inverse_depth": {"anchor_spacing": "inverse_depth"},
    "grid/urope_channelwise": {"anchor_assignment": "channels"},
    "grid/urope_learnable": {"learnable_anchors": True},
}


def test_every_grid_config_loads_with_the_pair_its_name_says():
    names = shipped_group_config_names("grid")
    pairs = set()
    for name in names:
        cfg = load_run_config(name)
        mc = cfg.model_config()
        if name.startswith("grid/plucker_"):
            assert mc.plucker and mc.global_pe == name.removeprefix("grid/plucker_") and not mc.pe_options
            continue
        if name.startswith("grid/urope_"):
            assert mc.global_pe == "urope" and mc.pe_options == URoPE_ABLATIONS[name] and not mc.plucker, name
            assert cfg.output_dir == f"runs/{name}" and mc.num_heads == 16 and mc.head_dim == 64, name
            continue
        qk, vo = (part.split("-", 1)[1] for part in name.removeprefix("grid/").split("_"))
        assert mc.global_pe == {"qk": qk, "vo": vo} and not mc.plucker, name
        assert cfg.output_dir == f"runs/{name}" and mc.embed_dim == 1024, name
        pairs.add((qk, vo))
    table1 = {(qk, vo) for qk in ("none", "2d", "p", "p2d") for vo in ("none", "2d", "p", "p2d")}
    table3 = {("p2d", vo) for vo in ("p2d", "Rt2d", "KR2d", "Kt2d", "K2d", "R2d", "t2d", "2d")}
    assert pairs == table1 | table3 and len(names) == 23 + len(URoPE_ABLATIONS) + 1
    assert set(URoPE_ABLATIONS) | {"grid/plucker_rope", "grid/plucker_urope"} <= set(names)
    assert not any(n.startswith("grid") for n in shipped_config_names())


def test_grid_names_are_resolved_only_inside_the_shipped_folder():
    with pytest.raises(ConfigError, match=r"no shipped config of that name.*grid/NAME: 32 configs"):
        load_run_config("grid/qk-x_vo-y")
    with pytest.raises(ConfigError, match="not found"):
        load_run_config("accelerate/ddp")  # only the grid folder holds run configs
    cfg = load_run_config("grid/qk-p2d_vo-KR2d", ["train.steps=3"])
    assert cfg.train.steps == 3


@pytest.mark.parametrize("name", sorted(URoPE_ABLATIONS) + ["grid/plucker_urope"])
def test_urope_ablation_grid_configs_build_a_model_that_runs(name):
    """Each ablation cell, at the tiny size (its heads and head dim kept: 16 heads of 64 would be
    too slow, so 8 heads of 16 channels; 8 anchors head-wise need 8 heads), runs a forward pass."""
    import torch

    from depthpe import DepthModel

    mc = load_run_config(name).model_config()
    model = DepthModel.from_preset("tiny", global_pe=mc.global_pe, pe_options=mc.pe_options, plucker=mc.plucker,
                                   num_heads=8).eval()
    K = torch.tensor([[30.0, 0, 13.5], [0, 30.0, 13.5], [0, 0, 1]]).expand(1, 2, 3, 3).clone()
    w2c = torch.eye(4).repeat(1, 2, 1, 1)
    w2c[0, 1, 0, 3] = 0.5
    with torch.no_grad():
        depth = model(torch.rand(1, 2, 3, 28, 28), K, w2c)["depth"]
    assert torch.isfinite(depth).all()
