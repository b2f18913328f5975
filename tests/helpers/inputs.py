"""Small model inputs with moving cameras."""

import torch


def moving_camera_inputs(B: int = 1, S: int = 2, H: int = 14, W: int = 28):
    """images (B,S,3,H,W) in [0,1]; K (B,S,3,3) pixels; w2c (B,S,4,4) normalized OpenCV
    world-to-camera (view 0 identity, the others rotated about y and translated)."""
    g = torch.Generator().manual_seed(0)
    images = torch.rand(B, S, 3, H, W, generator=g)
    K = torch.tensor([[20.0, 0, W / 2 - 0.5], [0, 18.0, H / 2 - 0.5], [0, 0, 1]]).expand(B, S, 3, 3).clone()
    w2c = torch.eye(4).expand(B, S, 4, 4).clone()
    for s in range(1, S):
        a = 0.3 * s
        w2c[:, s, 0, 0] = w2c[:, s, 2, 2] = torch.cos(torch.tensor(a))
        w2c[:, s, 0, 2] = torch.sin(torch.tensor(a))
        w2c[:, s, 2, 0] = -torch.sin(torch.tensor(a))
        w2c[:, s, :3, 3] = torch.tensor([0.8, -0.1, 0.2]) * s
    return images, K, w2c
