"""The micro model and run configuration most tests train or build (CPU, seconds)."""

from depthpe.model import DepthModel, DepthModelConfig
from depthpe.run import RunConfig

MICRO_MODEL = dict(preset="tiny", backbone_blocks=1, embed_dim=32, num_blocks=4, num_heads=2,
                   head_features=16, head_out_channels=[8, 16, 32, 32], head_layers=[0, 1, 2, 3])


def run_config(root, out, **sections):
    """A ``RunConfig`` of the micro model on the synthetic dataset at ``root``, writing to ``out``;
    each keyword replaces (dict: updates) that section."""
    d = {
        "output_dir": str(out),
        "seed": 0,
        "model": dict(MICRO_MODEL),
        "data": {"sources": [{"name": "synth", "root": str(root), "split": "train"}], "views": [2, 3],
                 "aspect": [0.5, 1.0], "image_width": 42, "max_images_per_batch": 6},
        "optim": {"lr": 1e-3, "warmup_steps": 2},
        # One intra-op thread: the default (the machine's cores) makes a run beside the other pytest
        # worker several times slower (docs/install.md, "Keeping CI under 20 minutes").
        "train": {"steps": 4, "num_workers": 0, "log_every": 1, "checkpoint_every": 2, "cpu": True,
                  "torch_threads": 1},
        "val": {"sources": [], "every": 0},
    }
    for k, v in sections.items():
        d[k] = {**d.get(k, {}), **v} if isinstance(v, dict) else v
    return RunConfig.from_dict(d)


def micro_model(global_pe="rope"):
    """The micro model (random weights, eval mode) with the global encoding ``global_pe``."""
    cfg = DepthModelConfig.from_preset("tiny", **{k: v for k, v in MICRO_MODEL.items() if k != "preset"},
                                       global_pe=global_pe)
    return DepthModel(cfg, load_backbone_weights=False).eval()
