"""Stand-in models that return known depths."""

import torch


class GroundTruthModel(torch.nn.Module):
    """Returns ``factor`` x the normalized GT of the scene it is called for (in evaluation order)."""

    def __init__(self, gts: list[torch.Tensor], factor: float):
        super().__init__()
        self.p = torch.nn.Parameter(torch.zeros(1))
        self.queue, self.factor = list(gts), factor

    def forward(self, images, K, w2c):
        return {"depth": self.queue.pop(0) * self.factor}
