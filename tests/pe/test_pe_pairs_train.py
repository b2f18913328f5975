"""Every {qk, vo} pair of the official DPPE transforms trains in a micro model on CPU (2 steps)."""

from __future__ import annotations

import time

import torch

from depthpe import DepthModel, DepthModelConfig
from depthpe.pe.spec import OFFICIAL_TRANSFORMS

H, W = 28, 28  # 2 x 2 patches


def micro_config(global_pe) -> DepthModelConfig:
    """1 aggregator block of width 32, 2 heads of 16 (a multiple of 8 for every transform)."""
    return DepthModelConfig.from_preset("tiny", embed_dim=32, num_heads=2, num_blocks=1,
                                        head_layers=[0, 0, 0, 0], head_features=16,
                                        head_out_channels=[8, 8, 16, 16], global_pe=global_pe)


def inputs(S=2):
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(1, S, 3, H, W, generator=gen)
    K = torch.tensor([[30.0, 0, 13.5], [0, 30.0, 13.5], [0, 0, 1]]).expand(1, S, 3, 3)
    w2c = torch.eye(4).repeat(1, S, 1, 1)
    w2c[0, 1, :3, 3] = torch.tensor([0.3, 0.0, 0.1])
    return images, K, w2c


def test_every_pair_trains_two_steps():
    torch.manual_seed(0)
    model = DepthModel(micro_config("rope")).train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    images, K, w2c = inputs()
    start = time.perf_counter()
    for qk in (*OFFICIAL_TRANSFORMS, "vggt2d"):
        for vo in OFFICIAL_TRANSFORMS:
            pair = {"qk": qk, "vo": vo}
            model.config = model.aggregator.config = micro_config(pair)
            model.load_state_dict(state)
            opt = torch.optim.SGD(model.trainable_parameters(), lr=1e-2)
            losses = []
            for _ in range(2):
                loss = model(images, K, w2c)["depth"].log().abs().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
            assert all(torch.isfinite(torch.tensor(losses))), pair
            grads = [p.grad for p in model.aggregator.global_blocks.parameters()]
            assert all(g is not None and torch.isfinite(g).all() for g in grads), pair
    print(f"{15 * 14} pairs x 2 steps: {time.perf_counter() - start:.1f} s")
