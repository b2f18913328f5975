"""``DepthModel``: frozen DINOv2 + VGGT-style aggregator + DPT depth head, with Hub save/load.

State-dict layout (VGGT names, so VGGT-1B weights map with a short table: ``from_vggt`` and
``depthpe.model.vggt_weights``):
``aggregator.patch_embed.*`` (timm DINOv2 keys), ``aggregator.backbone_proj.*`` (only when the
backbone width differs from ``embed_dim``), ``aggregator.camera_token``, ``aggregator.register_token``,
``aggregator.frame_blocks.i.*``, ``aggregator.global_blocks.i.*``, ``depth_head.*`` (VGGT DPT names).

Trainable parameters are exactly those with ``requires_grad`` (everything except the backbone,
which is frozen unless the config's ``train_backbone``); ``trainable_parameters()`` lists them and ``param_groups(wd)`` splits them for AdamW.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn as nn
from huggingface_hub import PyTorchModelHubMixin

from ..pe import check_encoding_cameras
from .aggregator import Aggregator
from .config import DepthModelConfig
from .dpt import DPTHead
from .inference import check_input_shapes, check_inputs, predict_depth
from .state_dicts import state_dict_mismatches

__all__ = ["DepthModel", "CheckpointMismatchError", "checkpoint_files", "check_model_folder", "model_files",
           "model_folder_problem"]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"


class CheckpointMismatchError(ValueError, RuntimeError):
    """A checkpoint's state dict does not match the model built from its config, or its weights file
    cannot be read. A ``ValueError`` (bad input: the commands turn it into one ``error:`` line, as for
    any model that cannot be loaded) and, as it always was, a ``RuntimeError``."""


def _mismatch_message(missing: list[str], unexpected: list[str], shapes: list[str]) -> str:
    """The missing keys, unexpected keys and shape mismatches, each shortened to 20 items."""
    def show(items):
        return f"{items[:20]}{f' ... ({len(items)} in all)' if len(items) > 20 else ''}"

    return f"missing keys {show(missing)}; unexpected keys {show(unexpected)}; shape mismatches {show(shapes)}"


def _check_config_matches_weights(model_cls, config: DepthModelConfig, config_path: str, weights_path: str,
                                  strict: bool) -> None:
    """Compare the tensor shapes of the ``model_cls`` model ``config`` describes with those stored in the
    safetensors file, before any memory is allocated for either: the model is built on the meta
    device and only the file's header is read. Raises ``CheckpointMismatchError`` for any shape
    mismatch and, with ``strict``, for missing or unexpected keys; so a ``config.json`` that claims
    e.g. ``embed_dim: 16384`` next to small weights is refused instead of allocating gigabytes."""
    from safetensors import safe_open

    try:
        with safe_open(weights_path, framework="pt") as f:
            stored = {name: torch.empty(f.get_slice(name).get_shape(), device="meta") for name in f.keys()}
    except Exception as err:  # noqa: BLE001 - safetensors raises its own error types
        raise CheckpointMismatchError(f"{weights_path}: not a readable safetensors file ({err})") from err
    with torch.device("meta"):
        expected = model_cls(config, load_backbone_weights=False).state_dict()
    missing, unexpected, shapes = state_dict_mismatches(expected, stored)
    if shapes or (strict and (missing or unexpected)):
        raise CheckpointMismatchError(
            f"{config_path} does not describe the weights in {weights_path} (checked before building the "
            f"model): {_mismatch_message(missing, unexpected, shapes)}. Was config.json edited, or the "
            "checkpoint saved by a different depthpe version?"
        )


class DepthModel(
    nn.Module,
    PyTorchModelHubMixin,
    library_name="depthpe",
    pipeline_tag="depth-estimation",
    tags=["depthpe", "multi-view-depth", "vggt"],
):
    """Multi-view depth model. ``DepthModel(config)`` or ``DepthModel.from_preset("tiny")``.

    ``forward(images, K, w2c)`` works in the normalized scene frame (view 0 = identity, unit mean
    camera distance); ``predict`` normalizes and de-normalizes for callers.
    ``load_backbone_weights=False`` builds the backbone without downloading/reading its weights
    (used when a checkpoint provides them).
    """

    def __init__(self, config: DepthModelConfig | dict | None = None, *, load_backbone_weights: bool = True):
        super().__init__()
        if config is None:
            config = DepthModelConfig()
        elif isinstance(config, dict):
            config = DepthModelConfig.from_dict(config)
        elif not isinstance(config, DepthModelConfig):
            raise TypeError(f"config must be a DepthModelConfig or dict, got {type(config).__name__}")
        self.config = config
        self.aggregator = Aggregator(config, load_backbone_weights=load_backbone_weights)
        self.depth_head = DPTHead(
            2 * config.embed_dim,
            patch_size=config.patch_size,
            features=config.head_features,
            out_channels=config.head_out_channels,
        )

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "DepthModel":
        """Build a new model from a named preset (``PRESETS``) with config overrides."""
        return cls(DepthModelConfig.from_preset(name, **overrides))

    # ----------------------------------------------------------------- forward
    def forward(self, images: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor) -> dict[str, torch.Tensor]:
        """Depth in the normalized scene frame.

        images: (B, S, 3, H, W) RGB in [0, 1], H, W multiples of 14; K: (B, S, 3, 3) pixel
        intrinsics of these images; w2c: (B, S, 3|4, 4) normalized OpenCV world-to-camera
        (view 0 = identity, translations divided by the scene scale).
        Returns {"depth": (B, S, H, W) > 0, "conf": (B, S, H, W) > 1}, float32.

        Only shapes are checked here (no host-device sync, so ``torch.compile`` captures one graph);
        ``check_inputs`` checks the values (NaN, focal lengths, image range) where data enters.
        """
        check_input_shapes(images, K, w2c, self.config.patch_size)
        layers = self.aggregator(images, K, w2c)
        depth, conf = self.depth_head(layers, images.shape[-2:])
        return {"depth": depth, "conf": conf}

    def check_inputs(self, images: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor) -> None:
        """Validate the inputs of ``forward`` by shape and value; raise ``ValueError`` saying what is
        wrong and how to fix it (module-level ``check_inputs``, then the cameras as the global
        encoding reads them: ``depthpe.pe.check_encoding_cameras``, which warns for translations
        longer than ``pe_options.max_translation``, default 10).

        images: (B, S, 3, H, W) float RGB in [0, 1], H, W multiples of the patch size; K: (B, S, 3, 3)
        pixel intrinsics; w2c: (B, S, 3|4, 4) OpenCV world-to-camera. One host-device sync: call
        it where data enters (``predict`` and evaluation do), not in a training step.
        """
        check_inputs(images, K, w2c, self.config.patch_size)
        check_encoding_cameras(self.config.global_pe, K, w2c, **self.config.pe_options)

    def predict(
        self,
        images: torch.Tensor,
        K: torch.Tensor,
        w2c: torch.Tensor,
        scale: float | torch.Tensor | None = None,
        scale_reference: str = "others",
        dtype: str = "fp32",
    ) -> dict[str, torch.Tensor]:
        """Depth in the caller's units for a posed set of views (inference, no gradients):
        ``depthpe.model.inference.predict_depth`` with this model, the one inference path that
        ``depthpe predict`` and evaluation use too.

        images: (B, S, 3, H, W) or (S, 3, H, W) RGB in [0, 1]; K: (B, S, 3, 3) / (S, 3, 3) pixel
        intrinsics; w2c: (B, S, 3|4, 4) / (S, 3|4, 4) OpenCV world-to-camera in any world frame and
        unit; view 0 is the reference. scale: the length that becomes 1 in the model's frame (None =
        the mean camera distance of ``scale_reference``: "others" or "all", as the model was
        trained; its training_inputs.json says which); dtype: "fp32" or "bf16" (autocast).
        Returns {"depth", "conf"} shaped like the images without channels, plus "scale" (B,) or ().
        Raises ``DegenerateSceneError`` when the cameras do not move and no ``scale`` is given.
        """
        return predict_depth(self, images, K, w2c, scale=scale, scale_reference=scale_reference, dtype=dtype)

    # --------------------------------------------------------------- training
    def trainable_parameters(self) -> list[nn.Parameter]:
        """Parameters that are trained (``requires_grad``): all but the backbone, unless
        ``config.train_backbone``."""
        return [p for p in self.parameters() if p.requires_grad]

    def no_weight_decay_names(self) -> list[str]:
        """Names of trainable parameters exempt from weight decay: biases, norm weights,
        LayerScale gammas (all 0/1-D tensors) and the camera/register tokens."""
        return [
            n for n, p in self.named_parameters()
            if p.requires_grad and (p.ndim <= 1 or n.endswith(("camera_token", "register_token")))
        ]

    def param_groups(self, weight_decay: float) -> list[dict]:
        """AdamW parameter groups: [{"name": "decay", "params": decayed, "weight_decay": weight_decay},
        {"name": "no_decay", "params": no_weight_decay_names(), "weight_decay": 0.0}] (empty groups omitted)."""
        exempt = set(self.no_weight_decay_names())
        decay, no_decay = [], []
        for n, p in self.named_parameters():
            if p.requires_grad:
                (no_decay if n in exempt else decay).append(p)
        groups = [
            {"name": "decay", "params": decay, "weight_decay": float(weight_decay)},
            {"name": "no_decay", "params": no_decay, "weight_decay": 0.0},
        ]
        return [g for g in groups if g["params"]]

    # ------------------------------------------------------------ save / load
    def _save_pretrained(self, save_directory: Path) -> None:
        """Write ``model.safetensors`` and ``config.json`` (called by ``save_pretrained``)."""
        from safetensors.torch import save_model

        save_directory = Path(save_directory)
        model = self.module if hasattr(self, "module") else self
        save_model(model, str(save_directory / WEIGHTS_NAME))
        self.config.to_json(save_directory / CONFIG_NAME)

    def load_weights(self, state_dict: dict[str, torch.Tensor], *, strict: bool = True) -> None:
        """Load a state dict; with ``strict`` raise ``CheckpointMismatchError`` listing missing keys,
        unexpected keys and shape mismatches (nothing is loaded then)."""
        missing, unexpected, shapes = state_dict_mismatches(self.state_dict(), state_dict)
        if shapes or (strict and (missing or unexpected)):
            raise CheckpointMismatchError(
                f"checkpoint does not match the model built from its config: "
                f"{_mismatch_message(missing, unexpected, shapes)}. Was it saved by a different depthpe "
                "version or with a different config?"
            )
        self.load_state_dict(state_dict, strict=strict)

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: str | Path,
        *,
        revision: str | None = None,
        cache_dir: str | Path | None = None,
        force_download: bool = False,
        local_files_only: bool = False,
        token: str | bool | None = None,
        map_location: str = "cpu",
        strict: bool = True,
        **config_overrides,
    ) -> "DepthModel":
        """Load a model saved with ``save_pretrained`` from a local directory or a Hub repo id.

        Reads ``config.json`` (unknown fields raise) and ``model.safetensors``; the backbone is
        built WITHOUT downloading weights (the checkpoint holds them), whatever ``pretrained``
        says. Loading is strict by default (missing/unexpected keys raise
        ``CheckpointMismatchError``). Before the model is built, the shapes the config implies are
        compared with the weight file's header (no tensor is allocated), so a config that does not
        match the weights is refused with ``CheckpointMismatchError`` before any large allocation. ``config_overrides`` change config fields before building
        (e.g. ``gradient_checkpointing=True``). Returns the model in eval mode on ``map_location``.
        """
        files = _resolve_checkpoint_files(
            str(pretrained_model_name_or_path),
            revision=revision, cache_dir=cache_dir, force_download=force_download,
            local_files_only=local_files_only, token=token,
        )
        config = DepthModelConfig.from_json(files[CONFIG_NAME])
        if config_overrides:
            config = config.replace(**config_overrides)
        from safetensors.torch import load_file

        _check_config_matches_weights(cls, config, files[CONFIG_NAME], files[WEIGHTS_NAME], strict)
        model = cls(config, load_backbone_weights=False)
        model.load_weights(load_file(files[WEIGHTS_NAME], device="cpu"), strict=strict)
        return model.to(map_location).eval()

    @classmethod
    def from_vggt(
        cls,
        path_or_hub_id: str | Path = "facebook/VGGT-1B",
        *,
        revision: str | None = None,
        cache_dir: str | Path | None = None,
        token: str | bool | None = None,
        local_files_only: bool = False,
        map_location: str = "cpu",
        **config_overrides,
    ) -> "DepthModel":
        """A new model initialised from a VGGT-format checkpoint (default: VGGT-1B, CC BY-NC 4.0).

        path_or_hub_id: a ``.safetensors`` / ``.pt`` state dict, a folder holding one, or a Hub repo
        id (``model.safetensors``, else ``model.pt``). The backbone (``aggregator.patch_embed``, mapped
        onto timm), the special tokens, the frame/global blocks and the depth head are loaded; the
        camera/point/track heads are ignored; any other missing or unexpected key raises
        ``VGGTWeightsError`` (``depthpe.model.vggt_weights``). ``config_overrides`` are
        ``DepthModelConfig`` fields on top of the VGGT-1B defaults: any ``global_pe`` (the encodings
        have no parameters), or a reduced architecture for small VGGT-format checkpoints (backbone,
        backbone_blocks, embed_dim, num_blocks, num_heads, head_features, head_out_channels,
        head_layers). No timm weights are downloaded. Returns the model in eval mode on ``map_location``.
        """
        from .vggt_weights import load_vggt_weights, read_vggt_state_dict

        config = DepthModelConfig(**config_overrides)
        state = read_vggt_state_dict(
            path_or_hub_id, revision=revision, cache_dir=cache_dir, token=token, local_files_only=local_files_only
        )
        model = cls(config, load_backbone_weights=False)
        load_vggt_weights(model, state)
        return model.to(map_location).eval()


def model_files(model_id: str, revision: str | None = None, flag: str = "--model") -> dict[str, str]:
    """``checkpoint_files`` for a command: a model that cannot be found or read is a ``ConfigError``
    with one line naming ``flag`` and what to pass instead (a typo, a training checkpoint or run
    folder, a folder without model.safetensors, a Hub id that does not resolve)."""
    from ..config import ConfigError

    try:
        return checkpoint_files(model_id, revision)
    except (OSError, ValueError) as err:
        raise ConfigError(f"{flag} {str(err).splitlines()[0]}") from None


def checkpoint_files(model_id: str, revision: str | None = None) -> dict[str, str]:
    """{"config": path, "weights": path} of the config.json and model.safetensors that
    ``DepthModel.from_pretrained(model_id, revision=revision)`` loads (a local folder, or the Hub
    cache after a download). Raises FileNotFoundError like ``from_pretrained``."""
    files = _resolve_checkpoint_files(str(model_id), revision=revision)
    return {"config": files[CONFIG_NAME], "weights": files[WEIGHTS_NAME]}


def check_model_folder(folder: str | os.PathLike) -> None:
    """Check that a local model folder loads, without loading it: its ``config.json`` is a valid
    ``DepthModelConfig`` and its ``model.safetensors`` is readable and holds exactly the tensors of
    that config's model (only the file's header is read; the model is built on the meta device).
    Raises ``ValueError`` (``CheckpointMismatchError`` or ``ConfigError``) saying what is wrong;
    for ``depthpe push``, which must not upload a model nobody can load."""
    folder = Path(folder)
    config = DepthModelConfig.from_json(folder / CONFIG_NAME)
    _check_config_matches_weights(DepthModel, config, str(folder / CONFIG_NAME), str(folder / WEIGHTS_NAME),
                                  strict=True)


def model_folder_problem(model_id: str) -> str | None:
    """Why a local ``--model`` cannot be loaded, as one line saying what to pass instead, or None
    (a model folder, or a name that may be a Hub repo id): a training checkpoint folder
    (``checkpoints/step_N`` holds the model in ``model/``), a run folder (``final/``), a folder
    without ``config.json`` / ``model.safetensors``, a path that does not exist."""
    path = Path(os.path.expanduser(model_id))
    if path.is_dir():
        absent = [n for n in (CONFIG_NAME, WEIGHTS_NAME) if not (path / n).is_file()]
        if not absent:
            return None
        if (path / "state").is_dir() or (path / "trainer_state.json").is_file():
            return (f"{model_id} is a training checkpoint, not an exported model; pass its model folder "
                    f"{path / 'model'}")
        if (path / "final").is_dir() or (path / "checkpoints").is_dir():
            return f"{model_id} is a run folder, not an exported model; pass {path / 'final'} (or a checkpoints/*/model)"
        return (f"{model_id} is not a depthpe model folder: missing {', '.join(absent)} (expected the output of "
                "depthpe train: RUN/final, or DepthModel.save_pretrained)")
    if path.exists():
        return f"{model_id} is a file, not a model folder (pass the folder holding config.json and model.safetensors)"
    if model_id.startswith((".", "/", "~")) or model_id.count("/") != 1:
        return f"{model_id} does not exist (pass a model folder such as runs/NAME/final, or a Hub repo id user/name)"
    return None


def _resolve_checkpoint_files(model_id: str, **hub_kwargs) -> dict[str, str]:
    """Local paths of config.json and model.safetensors for a directory or a Hub repo id."""
    problem = model_folder_problem(model_id)
    if problem:
        raise FileNotFoundError(problem)
    if os.path.isdir(os.path.expanduser(model_id)):
        return {name: os.path.join(os.path.expanduser(model_id), name) for name in (CONFIG_NAME, WEIGHTS_NAME)}
    from huggingface_hub import hf_hub_download

    try:
        return {
            name: hf_hub_download(repo_id=model_id, filename=name, **hub_kwargs)
            for name in (CONFIG_NAME, WEIGHTS_NAME)
        }
    except Exception as err:
        detail = str(err).splitlines()[0] if str(err) else ""
        raise FileNotFoundError(
            f"{model_id!r} is neither a local model folder nor a Hub repo holding "
            f"{CONFIG_NAME} and {WEIGHTS_NAME} ({type(err).__name__}: {detail})"
        ) from err
