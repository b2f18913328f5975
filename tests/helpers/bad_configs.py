"""Bad `depthpe train` arguments and the one error line each gives (tests/run/test_run_config.py runs them; docs/configuration.md lists them)."""

# (arguments after `depthpe train`, a fragment of the one error line). The same table is in docs/configuration.md.
BAD_CONFIGS = [
    (["train.stepz=3"], "unknown config key 'train.stepz' (did you mean 'train.steps'?)"),
    (["train.steps=abc"], "train.steps: abc is not an integer"),
    (["train.steps=1e3"], "train.steps: 1000.0 is not an integer"),
    (["optim.lr=abc"], "optim.lr: abc is not a number"),
    (["data.views=[8,2]"], "data.views = [8, 2] has min > max"),
    (["model.global_pe=prop"], "unknown encoding 'prop' (did you mean 'prope'?"),
    (["data.sources.0.root=@missing"], "index.json not found"),
    (["val.sources=[{name: synth, root: @missing, split: val}]"], "val.sources.0 (synth): "),
    (["output_dir=@file"], "is a file, not a folder"),
    (["--resume", "latest"], "--resume latest: no complete checkpoint"),
    (["--resume", "@ckpt", "model.global_pe=urope"], "holds another model: model.global_pe"),
    (["train.report_to=[tb]"], "unknown tracker 'tb'"),
    (["--config", "@malformed"], "is not valid YAML"),
    (["model.preset=huge"], "unknown preset 'huge'"),
    (["optim.grad_clip=0"], "optim.grad_clip must be > 0"),
    (["--config", "no_such_config"], "no shipped config of that name"),
    (["data.aspect=0.5"], "data.aspect: must be a [min, max] list"),
    (["train.steps=0"], "train.steps must be >= 1"),
    (["train.cpu=maybe"], "train.cpu: maybe is not true or false"),
    (["data.patch_size=16", "data.image_width=112"], "data.patch_size=16 differs from model.patch_size=14"),
    (["val.sources=[{name: synth, rooot: x, split: val}]"],
     "unknown config key 'val.sources.0.rooot' (did you mean 'val.sources.0.root'?)"),
    (["train.steps"], "override 'train.steps' must look like section.key=value (e.g. train.steps=100)"),
    (["val.manifest=@missing"], "not found (give the val_manifest.json of a run, or null)"),
    (["model.backbone_weights=@missing"], "not found (give an existing file or null)"),
    (["model.init_from=@missing.safetensors"], "not found (give an existing checkpoint file or a Hub id)"),
    (["model.backbone=vit_small_patch14_reg4_dinov2x"], "model.backbone: timm has no model "
     "'vit_small_patch14_reg4_dinov2x' (did you mean 'vit_small_patch14_reg4_dinov2'?"),
]
