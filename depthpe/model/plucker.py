"""Plücker ray-map input embedding (``model.plucker: true``), the DPPE paper's Table 2 baseline.

Every pixel (u, v) of view s (OpenCV: pixel centres at integer coordinates, K in pixels) gets the
Plücker coordinates of its camera ray in the (normalized) world frame of ``w2c``:

    d = normalize(R^T K^-1 [u, v, 1]^T),   o = -R^T t (the camera centre),   ray = (d, o x d)

The 6-channel map is patchified like the image (``patch_size`` x ``patch_size`` patches) and
added to the patch tokens through a learned linear map (a strided convolution: one weight per
channel and pixel of a patch), initialised to zero so that a model starts exactly as without it
(e.g. from VGGT-1B, whose checkpoint has no such weights: ``from_vggt`` leaves them at zero).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..geometry import invert_intrinsics, to_4x4

__all__ = ["plucker_rays", "PluckerEmbedding"]


def plucker_rays(K: torch.Tensor, w2c: torch.Tensor, image_size: tuple[int, int]) -> torch.Tensor:
    """(B, S, 6, H, W) Plücker map (d, o x d) in float64.

    K: (B, S, 3, 3) pixel intrinsics; w2c: (B, S, 3|4, 4) world-to-camera; image_size (H, W).
    """
    H, W = image_size
    K64, E = K.detach().double(), to_4x4(w2c.detach().double())
    R, t = E[..., :3, :3], E[..., :3, 3]
    vv, uu = torch.meshgrid(torch.arange(H, dtype=torch.float64, device=K.device),
                            torch.arange(W, dtype=torch.float64, device=K.device), indexing="ij")
    pix = torch.stack([uu, vv, torch.ones_like(uu)], dim=-1).reshape(-1, 3)  # (H*W, 3)
    dirs = pix @ (R.mT @ invert_intrinsics(K64)).mT  # (B, S, H*W, 3)
    dirs = dirs / dirs.norm(dim=-1, keepdim=True)
    centre = -(R.mT @ t.unsqueeze(-1)).squeeze(-1)  # (B, S, 3)
    moment = torch.cross(centre.unsqueeze(-2).expand_as(dirs), dirs, dim=-1)
    rays = torch.cat([dirs, moment], dim=-1)  # (B, S, H*W, 6)
    return rays.mT.unflatten(-1, (H, W))


class PluckerEmbedding(nn.Module):
    """Linear patch embedding of the Plücker map: (B, S) cameras -> (B*S, h*w, C) token offsets.

    ``proj``: Conv2d(6, C, patch_size, stride=patch_size), weight and bias zero-initialised.
    """

    def __init__(self, patch_size: int, embed_dim: int):
        super().__init__()
        self.proj = nn.Conv2d(6, embed_dim, kernel_size=patch_size, stride=patch_size)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, K: torch.Tensor, w2c: torch.Tensor, image_size: tuple[int, int]) -> torch.Tensor:
        """K: (B, S, 3, 3), w2c: (B, S, 3|4, 4) -> (B*S, h*w, C) in the parameter dtype."""
        rays = plucker_rays(K, w2c, image_size).flatten(0, 1).to(self.proj.weight.dtype)
        return self.proj(rays).flatten(2).mT
