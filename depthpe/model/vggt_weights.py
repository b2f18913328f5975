"""Loading VGGT-format checkpoints (e.g. ``facebook/VGGT-1B``) into a ``DepthModel``.

A VGGT checkpoint is a flat state dict (``model.safetensors`` or ``model.pt``)
with the prefixes ``aggregator.`` (DINOv2 backbone, special tokens, frame/global blocks),
``depth_head.``, ``camera_head.``, ``point_head.`` and ``track_head.``. depthpe uses VGGT's names
everywhere except inside the backbone, which is a timm ViT. The mapping:

=========================================================  =============================================
VGGT key                                                   depthpe key
=========================================================  =============================================
``aggregator.patch_embed.cls_token`` + ``pos_embed[:, :1]``  ``aggregator.patch_embed.cls_token``
``aggregator.patch_embed.pos_embed[:, 1:]``                 ``aggregator.patch_embed.pos_embed``
``aggregator.patch_embed.register_tokens``                  ``aggregator.patch_embed.reg_token``
``aggregator.patch_embed.mask_token``                       dropped (only used for masked pre-training)
``aggregator.patch_embed.{patch_embed.proj,blocks.i,norm}.*``  same name (timm uses DINOv2's names)
``aggregator.{camera_token,register_token}``                same name
``aggregator.{frame_blocks,global_blocks}.i.*``             same name
``depth_head.*``                                            same name
``camera_head.*``, ``point_head.*``, ``track_head.*``       ignored (depthpe predicts depth only)
=========================================================  =============================================

The backbone rows are timm's own DINOv2 conversion: timm's DINOv2-reg ViT adds no position
embedding to its class token (``no_embed_class``), so DINOv2's class-token position is folded into
the token; the register tokens carry no position in both. With this mapping timm's
``forward_features`` reproduces VGGT's ``x_norm_patchtokens`` bit-exactly.
Any other key, and any depthpe parameter left without a value, is an error: nothing loads silently
half-way. The exceptions are the Plücker ray-map embedding (``model.plucker: true``,
``aggregator.plucker.*``) and URoPE's learnable anchors (``pe_options.learnable_anchors: true``,
``aggregator.global_pe_state.*``, log-scales of the anchors), which VGGT does not have: they stay at
their zero initialisation (the model then computes exactly what the checkpoint computes, with the
fixed anchors) and ``load_vggt_weights`` warns that it did so. The other positional encodings have
no parameters, so a VGGT checkpoint loads under any ``global_pe`` (the global blocks then start
from VGGT's RoPE-trained weights and fine-tuning adapts them).

VGGT numerics that depthpe keeps so that loaded weights behave as in VGGT (with ``global_pe: rope``
the outputs match VGGT's reference code to ~1e-6 relative in float32, square and non-square inputs):

* ImageNet mean/std normalization inside the model; backbone patch tokens taken after DINOv2's final
  LayerNorm (eps 1e-6, timm's) with cls/register tokens dropped; position grid resampled bicubically
  with antialiasing for other sizes (timm ``dynamic_img_size``) -- ``backbone.py``.
* Aggregator blocks: LayerNorm eps 1e-5 (not DINOv2's 1e-6), per-head LayerNorm q/k-norm, exact GELU,
  LayerScale -- ``blocks.py``. View 0 uses index 0 of the camera/register tokens -- ``aggregator.py``.
* 2D RoPE base 100 in frame and global attention: head dim split [y | x], rotate-half pairing, patch
  positions (y+1, x+1), special tokens at (0, 0) -- ``depthpe/pe/rope.py``, ``aggregator.py``.
* DPT head: residual units add ReLU(x) on the skip path (VGGT's in-place ReLU), bilinear resizes with
  ``align_corners=True``, sin-cos UV embedding x0.1 with aspect = image W/H, last hidden conv 32 wide
  (``min(32, features/2)``: equal to VGGT for features >= 64), head in float32 -- ``dpt.py``.

VGGT-1B is released under CC BY-NC 4.0 (non-commercial); models initialised from it inherit that.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from .backbone import read_state_dict
from .state_dicts import state_dict_mismatches

__all__ = [
    "VGGT_HUB_ID",
    "VGGT_WEIGHT_FILES",
    "IGNORED_PREFIXES",
    "ZERO_INIT_PREFIXES",
    "VGGTWeightsError",
    "resolve_vggt_file",
    "read_vggt_state_dict",
    "backbone_vggt_to_timm",
    "backbone_timm_to_vggt",
    "vggt_to_depthpe",
    "depthpe_to_vggt",
    "describe_vggt_state_dict",
    "load_vggt_weights",
]

VGGT_HUB_ID = "facebook/VGGT-1B"
VGGT_WEIGHT_FILES = ("model.safetensors", "model.pt")  # tried in this order
IGNORED_PREFIXES = ("camera_head.", "point_head.", "track_head.")
# depthpe parameters a VGGT checkpoint lacks that start at zero (the model is then unchanged).
ZERO_INIT_PREFIXES = ("aggregator.plucker.", "aggregator.global_pe_state.")
BACKBONE_PREFIX = "aggregator.patch_embed."
_AGG_PREFIXES = ("aggregator.frame_blocks.", "aggregator.global_blocks.")
_AGG_TOKENS = ("aggregator.camera_token", "aggregator.register_token")


class VGGTWeightsError(RuntimeError):
    """A VGGT checkpoint could not be obtained, or does not fit the model (the message says why and
    what to do)."""


# ------------------------------------------------------------------------------------------- files
def _looks_like_path(name: str) -> bool:
    return (
        name.startswith((".", "/", "~"))
        or name.count("/") != 1
        or name.endswith((".pt", ".pth", ".bin", ".safetensors"))
    )


def resolve_vggt_file(
    path_or_hub_id: str | Path,
    *,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    token: str | bool | None = None,
    local_files_only: bool = False,
) -> Path:
    """Local path of a VGGT checkpoint file.

    path_or_hub_id: a ``.safetensors`` / ``.pt`` file, a folder holding ``model.safetensors`` or
    ``model.pt``, or a Hub repo id such as ``facebook/VGGT-1B`` (``model.safetensors`` is downloaded,
    falling back to ``model.pt``; the usual Hugging Face cache applies). Raises ``VGGTWeightsError``
    saying how to get the file by hand when it cannot be found or downloaded.
    """
    name = os.path.expanduser(str(path_or_hub_id))
    if os.path.isfile(name):
        return Path(name)
    if os.path.isdir(name):
        for fname in VGGT_WEIGHT_FILES:
            if os.path.isfile(os.path.join(name, fname)):
                return Path(name) / fname
        raise VGGTWeightsError(f"folder {name!r} holds neither of {list(VGGT_WEIGHT_FILES)}")
    if _looks_like_path(name):
        raise VGGTWeightsError(
            f"VGGT checkpoint {name!r} does not exist (expected a .safetensors/.pt file, a folder with "
            f"{' or '.join(VGGT_WEIGHT_FILES)}, or a Hub repo id such as {VGGT_HUB_ID!r})"
        )
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    errors = []
    for fname in VGGT_WEIGHT_FILES:
        try:
            return Path(hf_hub_download(
                repo_id=name, filename=fname, revision=revision, cache_dir=cache_dir, token=token,
                local_files_only=local_files_only,
            ))
        except EntryNotFoundError as err:  # this file is not in the repo: try the next one
            errors.append(f"{fname}: {type(err).__name__}")
        except Exception as err:  # offline, no such repo, gated, network error, ...
            errors.append(f"{fname}: {type(err).__name__}: {err}")
            break
    raise VGGTWeightsError(
        f"could not download a VGGT checkpoint from the Hub repo {name!r} ({'; '.join(errors)}). "
        f"On a machine without access, download it elsewhere (e.g. `hf download {name} "
        f"{VGGT_WEIGHT_FILES[0]}`, about 5 GB for VGGT-1B), copy it over and pass the file path instead "
        "of the repo id (model.init_from: /path/to/model.safetensors in a training config). Gated repos "
        "(facebook/VGGT-1B-Commercial) also need an accepted licence and a token (HF_TOKEN)."
    )


def read_vggt_state_dict(path_or_hub_id: str | Path, **hub_kwargs) -> dict[str, torch.Tensor]:
    """The checkpoint's flat {VGGT key: tensor} dict on the CPU, the ignored heads
    (``IGNORED_PREFIXES``) already dropped. ``hub_kwargs``: see ``resolve_vggt_file``.
    A state dict nested under ``"model"`` (VGGT's training checkpoints) is unwrapped."""
    path = resolve_vggt_file(path_or_hub_id, **hub_kwargs)
    try:
        sd = read_state_dict(path)
    except Exception as err:
        raise VGGTWeightsError(f"could not read the VGGT checkpoint {str(path)!r}: {err}") from err
    return {k: v for k, v in sd.items() if not k.startswith(IGNORED_PREFIXES)}


# ----------------------------------------------------------------------------------------- mapping
def backbone_vggt_to_timm(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """VGGT/DINOv2 backbone weights (keys WITHOUT the ``aggregator.patch_embed.`` prefix) -> timm
    DINOv2-reg ViT keys. cls_token (1,1,C) + pos_embed[:, :1] -> cls_token; pos_embed (1,1+N,C)[:, 1:]
    -> pos_embed (1,N,C); register_tokens (1,R,C) -> reg_token; mask_token dropped; every other key
    (``patch_embed.proj.*``, ``blocks.i.*``, ``norm.*``) unchanged. Pure; the input is not modified."""
    out = {}
    for k, v in sd.items():
        if k == "mask_token":
            continue
        if k == "register_tokens":
            out["reg_token"] = v
        elif k == "cls_token":
            if "pos_embed" not in sd:
                raise VGGTWeightsError("the VGGT backbone has a cls_token but no pos_embed")
            out["cls_token"] = v + sd["pos_embed"][:, :1]
        elif k == "pos_embed":
            out["pos_embed"] = v[:, 1:]
        else:
            out[k] = v
    return out


def backbone_timm_to_vggt(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of ``backbone_vggt_to_timm`` up to an equivalent split: the class token keeps its
    whole value and its position entry is zero; mask_token is zero (it is unused at inference)."""
    out = {}
    for k, v in sd.items():
        if k == "reg_token":
            out["register_tokens"] = v
        elif k == "pos_embed":
            out["pos_embed"] = torch.cat([torch.zeros_like(v[:, :1]), v], dim=1)
        else:
            out[k] = v
    if "cls_token" in sd:
        out["mask_token"] = torch.zeros_like(sd["cls_token"][0])
    return out


def vggt_to_depthpe(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A VGGT-format state dict -> depthpe ``DepthModel`` keys (see the module table).

    camera/point/track head keys are dropped; any key outside ``aggregator.*`` / ``depth_head.*`` /
    the ignored heads raises ``VGGTWeightsError`` listing them. Whether the result fits a given model
    is checked by ``load_vggt_weights``.
    """
    out, backbone, unknown = {}, {}, []
    for k, v in sd.items():
        if k.startswith(IGNORED_PREFIXES):
            continue
        if k.startswith(BACKBONE_PREFIX):
            backbone[k[len(BACKBONE_PREFIX):]] = v
        elif k.startswith(_AGG_PREFIXES) or k in _AGG_TOKENS or k.startswith("depth_head."):
            out[k] = v
        else:
            unknown.append(k)
    if unknown:
        raise VGGTWeightsError(
            f"not a VGGT checkpoint: unexpected keys {_show(sorted(unknown))} (a VGGT state dict has only "
            f"aggregator.*, depth_head.* and {', '.join(p + '*' for p in IGNORED_PREFIXES)})"
        )
    out.update({BACKBONE_PREFIX + k: v for k, v in backbone_vggt_to_timm(backbone).items()})
    return out


def depthpe_to_vggt(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A ``DepthModel`` state dict in VGGT's format (aggregator + depth head; no camera/point/track
    heads), e.g. to read depthpe weights with VGGT's code (``load_state_dict(..., strict=False)``).
    Raises ``VGGTWeightsError`` if the model has parameters VGGT lacks (``aggregator.backbone_proj``:
    backbone width != embed_dim)."""
    extra = sorted(k for k in state_dict if k.startswith("aggregator.backbone_proj."))
    if extra:
        raise VGGTWeightsError(
            f"the model has {extra}: VGGT requires the backbone width to equal embed_dim"
        )
    out = {k: v for k, v in state_dict.items() if not k.startswith(BACKBONE_PREFIX)}
    backbone = {k[len(BACKBONE_PREFIX):]: v for k, v in state_dict.items() if k.startswith(BACKBONE_PREFIX)}
    out.update({BACKBONE_PREFIX + k: v for k, v in backbone_timm_to_vggt(backbone).items()})
    return out


def describe_vggt_state_dict(sd: dict[str, torch.Tensor]) -> dict:
    """The ``DepthModelConfig`` fields that can be read off a VGGT-format state dict's shapes:
    embed_dim, num_blocks, backbone_blocks (backbone depth), head_features, head_out_channels, plus
    ``backbone_dim`` (the backbone's width). Fields whose keys are absent are left out. num_heads and
    head_layers cannot be read from shapes."""
    info = {}

    def count(prefix: str) -> int:
        idx = {k[len(prefix):].split(".")[0] for k in sd if k.startswith(prefix)}
        return len([i for i in idx if i.isdigit()])

    if "aggregator.camera_token" in sd:
        info["embed_dim"] = int(sd["aggregator.camera_token"].shape[-1])
    if count("aggregator.frame_blocks."):
        info["num_blocks"] = count("aggregator.frame_blocks.")
    if count(BACKBONE_PREFIX + "blocks."):
        info["backbone_blocks"] = count(BACKBONE_PREFIX + "blocks.")
    if BACKBONE_PREFIX + "cls_token" in sd:
        info["backbone_dim"] = int(sd[BACKBONE_PREFIX + "cls_token"].shape[-1])
    if "depth_head.scratch.layer1_rn.weight" in sd:
        info["head_features"] = int(sd["depth_head.scratch.layer1_rn.weight"].shape[0])
    outs = [sd.get(f"depth_head.projects.{i}.weight") for i in range(4)]
    if all(o is not None for o in outs):
        info["head_out_channels"] = [int(o.shape[0]) for o in outs]
    return info


def _show(items: list, n: int = 12) -> str:
    return f"{items[:n]}{f' ... ({len(items)} in all)' if len(items) > n else ''}"


def load_vggt_weights(model: torch.nn.Module, vggt_sd: dict[str, torch.Tensor]) -> None:
    """Load a VGGT-format state dict into a ``DepthModel`` (in place, strictly).

    Maps the keys with ``vggt_to_depthpe``; every depthpe parameter/buffer must receive a tensor of
    its own shape and every mapped key must exist in the model, otherwise ``VGGTWeightsError`` lists
    missing keys, unexpected keys and shape mismatches, with the sizes read off the checkpoint
    (``describe_vggt_state_dict``) as a hint for ``from_vggt``'s config overrides. Nothing is loaded
    when it raises. dtypes are converted to the model's.
    """
    mapped = vggt_to_depthpe(vggt_sd)
    own = model.state_dict()
    missing, unexpected, shapes = state_dict_mismatches(own, mapped)
    zero_init = [k for k in missing if k.startswith(ZERO_INIT_PREFIXES)]
    missing = [k for k in missing if k not in zero_init]
    if missing or unexpected or shapes:
        cfg = getattr(model, "config", None)
        hint = describe_vggt_state_dict(vggt_sd)
        raise VGGTWeightsError(
            "the VGGT checkpoint does not fit the model: "
            f"missing keys {_show(missing)}; unexpected keys {_show(unexpected)}; "
            f"shape mismatches {_show(shapes)}. The checkpoint has {hint}"
            + (f"; the model config has backbone={cfg.backbone!r}, backbone_blocks={cfg.backbone_blocks}, "
               f"embed_dim={cfg.embed_dim}, num_blocks={cfg.num_blocks}, head_features={cfg.head_features}, "
               f"head_out_channels={cfg.head_out_channels}" if cfg is not None else "")
            + ". Pass matching config overrides to DepthModel.from_vggt (VGGT-1B needs none); the "
            "backbone must be the DINOv2 of the same width (backbone_dim == embed_dim in VGGT)."
        )
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in mapped.items()}, strict=not zero_init)
    if zero_init:
        warnings.warn(
            f"the VGGT checkpoint has no weights for {_show(zero_init)} (model.plucker: the Plücker "
            "ray-map embedding, or URoPE's learnable anchors, which VGGT does not have): they stay at "
            "their zero initialisation, so "
            "the model starts exactly as the checkpoint; fine-tuning trains them", stacklevel=2)
