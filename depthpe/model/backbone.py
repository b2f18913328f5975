"""The frozen timm DINOv2 backbone: building it, loading its weights, and reading patch tokens.

The backbone is a plain timm ``VisionTransformer`` (created with ``dynamic_img_size=True`` so any
H, W multiple of 14 works; the 37x37 position grid is resampled bicubically as in VGGT). The
aggregator keeps it as its ``patch_embed`` sub-module (VGGT's name), frozen: ``requires_grad``
False, always in eval mode, run under ``torch.no_grad``.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
import torch.nn as nn

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "BackboneWeightsError",
    "build_backbone",
    "load_backbone_weights",
    "read_state_dict",
    "backbone_patch_tokens",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class BackboneWeightsError(RuntimeError):
    """The backbone weights could not be obtained (download failed, bad file, key mismatch)."""


def build_backbone(
    name: str,
    *,
    pretrained: bool = False,
    weights_path: str | Path | None = None,
    num_blocks: int | None = None,
    trainable: bool = False,
) -> nn.Module:
    """Create a timm DINOv2 ViT (no classifier head), in eval mode, frozen unless ``trainable``.

    name: timm model name (e.g. ``vit_large_patch14_reg4_dinov2``). pretrained: download timm's
    weights (normal timm/Hugging Face cache); weights_path: load a local file instead (wins over
    ``pretrained``). num_blocks: keep only the first N transformer blocks (None = all); the final
    LayerNorm is kept. trainable: leave ``requires_grad`` on (``train_backbone`` of the model
    config); default frozen. Raises ``BackboneWeightsError`` with a fix when weights cannot be obtained.
    """
    import timm

    kwargs = dict(dynamic_img_size=True, num_classes=0)
    download = pretrained and weights_path is None
    full_depth_needed = download  # timm's pretrained loader is strict about the block count
    if num_blocks is not None and not full_depth_needed:
        kwargs["depth"] = int(num_blocks)
    try:
        vit = timm.create_model(name, pretrained=download, **kwargs)
    except RuntimeError as err:  # unknown names raise RuntimeError in timm
        if "Unknown model" in str(err):
            raise ValueError(
                f"unknown timm backbone {name!r}; use a DINOv2 name such as "
                "'vit_large_patch14_reg4_dinov2' (see timm.list_models('*dinov2*'))"
            ) from err
        if not download:
            raise
        raise _download_error(name, err) from err
    except Exception as err:  # network / hub errors come in many types
        if not download:
            raise
        raise _download_error(name, err) from err
    if num_blocks is not None:
        if num_blocks > len(vit.blocks):
            raise ValueError(
                f"backbone_blocks={num_blocks} but {name} has only {len(vit.blocks)} blocks"
            )
        vit.prune_intermediate_layers([int(num_blocks) - 1], prune_norm=False, prune_head=True)
    if weights_path is not None:
        load_backbone_weights(vit, weights_path)
    vit.requires_grad_(bool(trainable))
    vit.eval()
    return vit


def _cause(err: BaseException) -> str:
    """``Type: first line of the message``: torch's and the Hub's errors span many lines, and
    the errors built from them are printed as one ``error:`` line."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _download_error(name: str, err: Exception) -> BackboneWeightsError:
    return BackboneWeightsError(
        f"could not download the pretrained weights of backbone {name!r} "
        f"({_cause(err)}). On an offline machine, fetch the weights elsewhere "
        f"(e.g. huggingface.co/timm/{name}.lvd142m, file model.safetensors) and set "
        "backbone_weights: PATH in the model config, or set pretrained: false for a random backbone."
    )


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Read a safetensors file or a torch-saved state dict (optionally nested under 'model' or
    'state_dict') into a flat {name: tensor} dict on the CPU."""
    path = Path(path)
    if not path.is_file():
        raise BackboneWeightsError(f"weights file {str(path)!r} does not exist")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            sd = load_file(str(path), device="cpu")
        else:
            sd = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as err:
        raise BackboneWeightsError(
            f"could not read weights file {str(path)!r} ({_cause(err)}); expected a .safetensors file or a "
            "torch.save'd state dict of tensors"
        ) from err
    for key in ("model", "state_dict"):
        if isinstance(sd, dict) and isinstance(sd.get(key), dict):
            sd = sd[key]
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise BackboneWeightsError(f"{str(path)!r} does not hold a state dict of tensors")
    return sd


def load_backbone_weights(vit: nn.Module, path: str | Path) -> None:
    """Load DINOv2 weights from a local file into a (possibly block-pruned) timm ViT, strictly.

    Accepts timm keys (``reg_token``, ``blocks.N...``) or the original DINOv2 layout
    (``register_tokens``, ``mask_token``, pos_embed with a cls entry), converted with timm's own
    ``checkpoint_filter_fn``. Blocks beyond ``len(vit.blocks)`` are dropped; the classifier head,
    if any, is ignored. Raises ``BackboneWeightsError`` listing missing/unexpected keys.
    """
    from timm.models.vision_transformer import checkpoint_filter_fn

    sd = checkpoint_filter_fn(dict(read_state_dict(path)), vit)
    n = len(vit.blocks)
    kept = {}
    for k, v in sd.items():
        m = re.match(r"blocks\.(\d+)\.", k)
        if (m and int(m.group(1)) >= n) or k.startswith(("head.", "fc_norm.")):
            continue
        kept[k] = v
    own = vit.state_dict()
    missing = sorted(set(own) - set(kept))
    unexpected = sorted(set(kept) - set(own))
    shape_bad = [
        f"{k}: file {tuple(kept[k].shape)} vs model {tuple(own[k].shape)}"
        for k in set(own) & set(kept)
        if kept[k].shape != own[k].shape
    ]
    if missing or unexpected or shape_bad:
        raise BackboneWeightsError(
            f"backbone weights {str(path)!r} do not match the backbone: missing keys {missing[:10]}"
            f"{' ...' if len(missing) > 10 else ''}, unexpected keys {unexpected[:10]}"
            f"{' ...' if len(unexpected) > 10 else ''}, shape mismatches {sorted(shape_bad)[:10]}. "
            "Check that the file belongs to the configured backbone name."
        )
    vit.load_state_dict(kept, strict=True)


def backbone_patch_tokens(
    vit: nn.Module, images: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, *, trainable: bool = False
) -> torch.Tensor:
    """Patch tokens of the final LayerNorm, prefix (cls/register) tokens dropped.

    images: (N, 3, H, W) RGB in [0, 1]; mean/std: (1, 3, 1, 1) ImageNet statistics.
    Returns (N, (H/p) * (W/p), C_backbone), row-major with x fastest. Runs without gradients
    unless ``trainable`` (the model config's ``train_backbone``).
    """
    with torch.set_grad_enabled(torch.is_grad_enabled() and trainable):
        x = (images - mean.to(images.dtype)) / std.to(images.dtype)
        tokens = vit.forward_features(x)
        return tokens[:, vit.num_prefix_tokens:]
