"""The run config: one typed schema for every training run (the YAML file and its overrides).

``RunConfig`` is the only definition of a run's settings. Its sections are dataclasses whose fields,
types and defaults are what the YAML files, the ``key=value`` overrides, ``<output_dir>/config.yaml``
and the model card all use; ``depthpe.run.loading`` reads them with OmegaConf. Every field is
listed with its meaning in docs/configuration.md.

Sections: ``model`` (``ModelSection``: a preset plus any ``DepthModelConfig`` field, and
``init_from``), ``data`` (``depthpe.loader.config.DataConfig``), ``optim``, ``loss``, ``train``,
``val``, ``hub``. Each ``__post_init__`` checks ranges and choices, so a bad value fails when the
config is read, before anything is built.
"""

from __future__ import annotations

import dataclasses
import math
import re

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from omegaconf import MISSING

from ..config import ConfigError, env_interpolated_keys, instantiate, merge_layers, require
from depthpe.loader.config import DataConfig, SourceConfig
from ..hub.card import licence_problem
from ..hub.timeouts import DEFAULT_JOB_DEADLINE, DEFAULT_REQUEST_TIMEOUT, DEFAULT_RETRIES, DEFAULT_RETRY_DELAY
from ..config.inference import ViewProtocol
from ..model.config import PRESETS, DepthModelConfig

__all__ = ["OptimConfig", "LossConfig", "TrainLoopConfig", "ValConfig", "HubConfig", "ModelSection",
           "RunConfig", "build_run_config", "TRACKERS", "MIXED_PRECISION"]

TRACKERS = ("tensorboard", "wandb")
MIXED_PRECISION = ("no", "bf16", "fp16")


MAX_SEED = 2**32 - 1  # numpy.random.seed (set by Accelerate's set_seed) takes 0 .. 2**32 - 1


def non_finite_fields(obj, prefix: str = "") -> list[tuple[str, float]]:
    """(dotted key, value) of every float in a config dataclass tree that is inf or nan, in field order:
    nested dataclasses, and lists/tuples of floats or dataclasses (``data.sources.0.weight``)."""
    found = []
    for f in dataclasses.fields(obj):
        found += _non_finite(getattr(obj, f.name), f"{prefix}{f.name}")
    return found


def _non_finite(value, key: str) -> list[tuple[str, float]]:
    if isinstance(value, float):
        return [] if math.isfinite(value) else [(key, value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return non_finite_fields(value, key + ".")
    if isinstance(value, (list, tuple)):
        return [bad for i, item in enumerate(value) for bad in _non_finite(item, f"{key}.{i}")]
    return []


@dataclass
class OptimConfig:
    """AdamW and the learning-rate schedule (counted in optimizer steps).

    schedule: ``constant`` = linear warm-up from ``min_lr`` to ``lr`` over ``warmup_steps``, then
    constant (the DPPE paper's warmup-stable recipe); ``cosine`` = the same warm-up, then cosine
    decay to ``min_lr`` at the last step. ``grad_clip``: maximum global gradient norm (L2).
    """

    lr: float = 1e-4
    min_lr: float = 1e-6
    weight_decay: float = 0.05
    warmup_steps: int = 1000
    schedule: str = "constant"
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0

    def __post_init__(self):
        require(self.schedule in ("constant", "cosine"),
                 f"optim.schedule must be 'constant' or 'cosine', got {self.schedule!r}")
        require(0 <= self.min_lr <= self.lr, f"optim: need 0 <= min_lr <= lr, got min_lr={self.min_lr}, lr={self.lr} (fix optim.lr or optim.min_lr)")
        require(self.weight_decay >= 0, f"optim.weight_decay must be >= 0, got {self.weight_decay}")
        require(self.warmup_steps >= 0, f"optim.warmup_steps must be >= 0, got {self.warmup_steps}")
        require(self.grad_clip > 0, f"optim.grad_clip must be > 0 (a maximum gradient norm), got {self.grad_clip}")
        self.betas = tuple(float(b) for b in self.betas)
        require(all(0 <= b < 1 for b in self.betas), f"optim.betas must lie in [0, 1), got {list(self.betas)}")


@dataclass
class LossConfig:
    """Weights of the depth loss terms (``depthpe.run.losses.depth_loss``): L1 on normalized depth,
    VGGT's multi-scale gradient loss over ``gradient_scales`` scales, VGGT's confidence term; and the
    correspondence term on the global attention (``correspondence_weight``, 0 = off; docs/correspondence.md):
    the cross-entropy of each global layer's scores of a query patch over the patches of the next
    view against its true patch, for at most ``correspondence_queries`` query patches per view."""

    l1_weight: float = 1.0
    gradient_weight: float = 1.0
    gradient_scales: int = 4
    conf_weight: float = 0.0
    conf_alpha: float = 0.2
    correspondence_weight: float = 0.0
    correspondence_queries: int = 256

    def __post_init__(self):
        for key in ("l1_weight", "gradient_weight", "conf_weight", "conf_alpha", "correspondence_weight"):
            require(getattr(self, key) >= 0, f"loss.{key} must be >= 0, got {getattr(self, key)}")
        require(self.gradient_scales >= 1, f"loss.gradient_scales must be >= 1, got {self.gradient_scales}")
        require(self.correspondence_queries >= 1,
                f"loss.correspondence_queries must be >= 1 (query patches per view), got {self.correspondence_queries}")


@dataclass
class TrainLoopConfig:
    """Loop settings. ``steps`` counts optimizer steps; each uses ``grad_accum`` micro-batches.

    smoothing: EMA decay of logged metrics; checkpoint_every / keep_checkpoints: 0 = never / keep all;
    max_nonfinite_in_row: stop after this many skipped (non-finite) steps in a row; cpu: force CPU;
    torch_threads: intra-op threads on CPU (None = cores per process minus data workers);
    report_to: trackers (``tensorboard``, ``wandb``; ``[]`` = none besides train.log);
    compile: compile the model's aggregator blocks with ``torch.compile`` (in place: checkpoints
    keep their keys, eager and compiled runs resume from each other's checkpoints);
    dist_timeout: minutes a collective (all-reduce, barrier) of a run of several processes waits
    for the others before the run stops with an error naming the checkpoint to resume from.
    """

    steps: int = 240_000
    grad_accum: int = 1
    mixed_precision: str = "no"
    num_workers: int = 4
    log_every: int = 50
    smoothing: float = 0.95
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    max_nonfinite_in_row: int = 20
    cpu: bool = False
    torch_threads: Optional[int] = None
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])
    compile: bool = False
    dist_timeout: float = 10.0

    def __post_init__(self):
        require(self.dist_timeout > 0, f"train.dist_timeout must be > 0 (minutes), got {self.dist_timeout}")
        for key in ("steps", "grad_accum", "log_every", "max_nonfinite_in_row"):
            require(getattr(self, key) >= 1, f"train.{key} must be >= 1, got {getattr(self, key)}")
        for key in ("num_workers", "checkpoint_every", "keep_checkpoints"):
            require(getattr(self, key) >= 0, f"train.{key} must be >= 0, got {getattr(self, key)}")
        require(self.mixed_precision in MIXED_PRECISION,
                 f"train.mixed_precision must be one of {list(MIXED_PRECISION)}, got {self.mixed_precision!r}")
        require(0 <= self.smoothing < 1, f"train.smoothing must lie in [0, 1), got {self.smoothing}")
        require(self.torch_threads is None or self.torch_threads >= 1,
                 f"train.torch_threads must be >= 1 or null, got {self.torch_threads}")
        for name in self.report_to:
            require(name in TRACKERS, f"train.report_to: unknown tracker {name!r} (choose from {list(TRACKERS)})")


@dataclass
class ValConfig(ViewProtocol):
    """Periodic validation on held-out scenes (``every`` optimizer steps; 0 = only at the end).

    views, seed, manifest: which views of a scene (``depthpe.config.inference.ViewProtocol``, shared
    with ``depthpe eval``; seed also draws the scenes); max_scenes: scenes per source (None = all; a
    source's own ``max_scenes`` wins); selection: ``first`` (index order) or ``random`` (a draw
    seeded by ``seed`` and the source name, the paper's protocol); the scenes and views of the first
    validation are written to ``<output_dir>/val_manifest.json`` and reused by every later one (and
    by resumed runs); manifest: a val_manifest.json of another run to validate on exactly its views;
    image_width: None = ``data.image_width``; panels: scenes rendered as depth panels for the
    trackers; correspondence: also measure the correspondence lift of the global attention
    (``depthpe.probe``, docs/probe.md) on the same scenes and views, logged as the row
    ``correspondence`` of val_history.jsonl (off by default: one more forward pass per scene).
    """

    sources: list[SourceConfig] = field(default_factory=list)
    every: int = 1000
    max_scenes: Optional[int] = 16
    image_width: Optional[int] = None
    panels: int = 2
    selection: str = "first"
    correspondence: bool = False

    def _label(self, name: str) -> str:
        return f"val.{name}"

    def __post_init__(self):
        self.sources = [s if isinstance(s, SourceConfig) else SourceConfig.from_dict(s) for s in self.sources]
        self._check_view_protocol()
        require(self.selection in ("first", "random"), f"val.selection must be 'first' or 'random', got {self.selection!r}")
        require(self.every >= 0, f"val.every must be >= 0, got {self.every}")
        require(self.max_scenes is None or self.max_scenes >= 1, f"val.max_scenes must be >= 1 or null, got {self.max_scenes}")
        require(self.image_width is None or (self.image_width > 0 and self.image_width % 14 == 0),
                 f"val.image_width must be a positive multiple of 14 or null, got {self.image_width}")
        require(self.panels >= 0, f"val.panels must be >= 0, got {self.panels}")


@dataclass
class HubConfig:
    """Pushing to the Hugging Face Hub (main process, in the background; see ``depthpe.hub.pusher``).

    repo_id: "user/name" (None = no pushes); private: visibility when the repo is created;
    push_every: push every Nth checkpoint (the final model is always pushed); revision: branch
    (None = main); license: licence of the weights on the model card; retries / retry_delay:
    attempts after a failure and the first back-off in seconds (doubling); request_timeout: seconds
    one Hub request may wait to connect, send or receive; job_deadline: seconds one upload may take,
    retries included, before it is given up; wait_timeout: seconds to wait for uploads when training
    ends. The defaults are ``depthpe.hub.timeouts``'s (``DEFAULT_*``), written once there.
    """

    repo_id: Optional[str] = None
    private: bool = False
    push_every: int = 1
    revision: Optional[str] = None
    license: str = "apache-2.0"
    retries: int = DEFAULT_RETRIES
    retry_delay: float = DEFAULT_RETRY_DELAY
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    job_deadline: float = DEFAULT_JOB_DEADLINE
    wait_timeout: float = DEFAULT_JOB_DEADLINE

    def __post_init__(self):
        problem = licence_problem(self.license)
        require(problem is None, f"hub.license: {problem}")
        require(self.push_every >= 1, f"hub.push_every must be >= 1 (every Nth checkpoint), got {self.push_every}")
        require(self.retries >= 0 and self.retry_delay >= 0 and self.wait_timeout >= 0,
                 "hub.retries, hub.retry_delay and hub.wait_timeout must be >= 0")
        require(self.request_timeout > 0 and self.job_deadline > 0,
                 "hub.request_timeout and hub.job_deadline must be > 0 (seconds)")


def _check_model_section(self) -> None:
    """Preset and encoding names exist (the encoding through ``depthpe.pe.spec.encoding_pair``, its one
    validation); the architecture is valid once every field is known."""
    from ..pe.spec import encoding_pair

    if self.preset is not None and self.preset not in PRESETS:
        raise ValueError(f"model.preset: unknown preset {self.preset!r} (choose from {sorted(PRESETS)})")
    if self.global_pe != MISSING:
        try:
            encoding_pair(self.global_pe)
        except ValueError as err:
            raise ValueError(f"model.global_pe: {err}") from None
    if all(getattr(self, f.name) != MISSING for f in dataclasses.fields(DepthModelConfig)):
        self.model_config()  # validates the architecture (DepthModelConfig.validate)


@dataclass
class ModelSection:
    """The ``model`` section: ``preset`` (``tiny``, ``vggt-1b``; null = DepthModelConfig defaults)
    supplies every field not given; ``init_from`` is a VGGT-format checkpoint to start from (a Hub id
    such as facebook/VGGT-1B or a local .safetensors/.pt file); the other fields are DepthModelConfig's
    (see its docstring), each MISSING until a config layer or the preset sets it. The field list is
    DepthModelConfig's, written out so that a reader sees it; tests/run/test_run_config.py checks that
    the two stay the same."""

    preset: Optional[str] = "tiny"
    init_from: Optional[str] = None
    backbone: str = MISSING
    backbone_blocks: int | None = MISSING
    pretrained: bool = MISSING
    backbone_weights: str | None = MISSING
    patch_size: int = MISSING
    train_backbone: bool = MISSING
    embed_dim: int = MISSING
    num_blocks: int = MISSING
    num_heads: int = MISSING
    mlp_ratio: float = MISSING
    num_register_tokens: int = MISSING
    layerscale_init: float = MISSING
    global_pe: Any = MISSING
    pe_options: dict[str, Any] = MISSING
    plucker: bool = MISSING
    head_features: int = MISSING
    head_out_channels: list[int] = MISSING
    head_layers: list[int] = MISSING
    gradient_checkpointing: bool = MISSING

    def __post_init__(self):
        _check_model_section(self)

    def model_config(self) -> DepthModelConfig:
        """The ``DepthModelConfig`` of this section (``preset`` and ``init_from`` are not architecture)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(DepthModelConfig)}
        return DepthModelConfig.from_dict(values)


@dataclass
class RunConfig:
    """A whole training run: where it goes, its seed and the sections above."""

    output_dir: str = "runs/default"
    seed: int = 0
    model: ModelSection = field(default_factory=ModelSection)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainLoopConfig = field(default_factory=TrainLoopConfig)
    val: ValConfig = field(default_factory=ValConfig)
    hub: HubConfig = field(default_factory=HubConfig)

    @classmethod
    def from_dict(cls, mapping: dict, overrides: tuple[str, ...] = ()) -> "RunConfig":
        """Build from a plain mapping (a parsed YAML file) and dotted overrides; raises ``ConfigError``."""
        return build_run_config([mapping], overrides)

    def __post_init__(self):
        bad = non_finite_fields(self)
        require(not bad, f"{bad[0][0]} must be a finite number, got {bad[0][1]} (inf and nan are not allowed)" if bad else "")
        require(isinstance(self.seed, int) and 0 <= self.seed <= MAX_SEED,
                 f"seed must be an integer in [0, 2**32 - 1] (numpy's seed range), got {self.seed!r}")
        require(not (self.loss.correspondence_weight > 0 and not self.data.camera_noise.is_zero),
                "loss.correspondence_weight > 0 with data.camera_noise: the correspondence targets would come from "
                "the noisy cameras the model is given, not the true ones; set data.camera_noise to 0 or "
                "loss.correspondence_weight=0")
        require(not (self.loss.correspondence_weight > 0 and self.train.compile),
                "loss.correspondence_weight > 0 records the global attention's scores through hooks, which a "
                "compiled model does not run: set train.compile=false or loss.correspondence_weight=0")
        require(not (self.loss.correspondence_weight > 0 and self.model.gradient_checkpointing is True),
                "loss.correspondence_weight > 0 keeps the global attention's scores for the backward, which "
                "recomputed (checkpointed) blocks cannot: set model.gradient_checkpointing=false or "
                "loss.correspondence_weight=0")
        require(self.data.patch_size == self.model.patch_size or self.model.patch_size == MISSING,
                 f"data.patch_size={self.data.patch_size} differs from model.patch_size={self.model.patch_size} "
                 "(set both to the backbone's patch size, 14 for DINOv2)")

    def model_config(self) -> DepthModelConfig:
        """The ``DepthModelConfig`` of the ``model`` section."""
        return self.model.model_config()

    def to_dict(self) -> dict:
        """Plain dict form (lists instead of tuples), as written to ``config.yaml``."""
        from ..config import to_container

        return to_container(self)


def _fill_model_from_preset(node) -> None:
    """Set every model field that no layer set (MISSING) from ``model.preset`` (null preset: the
    DepthModelConfig defaults). Works on the merged OmegaConf node, before instantiation."""
    from omegaconf import OmegaConf

    preset = node.model.preset
    if preset is not None and preset not in PRESETS:
        raise ConfigError(f"model.preset: unknown preset {preset!r} (choose from {sorted(PRESETS)})")
    base = DepthModelConfig.from_preset(preset) if preset else DepthModelConfig()
    for f in dataclasses.fields(DepthModelConfig):
        if OmegaConf.is_missing(node.model, f.name):
            node.model[f.name] = getattr(base, f.name)


# Keys whose value may come from the environment: local paths, which no Hub push or tracker publishes.
ENV_ALLOWED_KEYS = re.compile(r"output_dir|data\.sources\.\d+\.root")


def _refuse_published_env(node) -> None:
    """ConfigError for an ``${oc.env:VAR}`` outside ``ENV_ALLOWED_KEYS``: the resolved value would be
    written into config.yaml, the hparams, train.log and the model card pushed to the Hub."""
    bad = [key for key in env_interpolated_keys(node) if not ENV_ALLOWED_KEYS.fullmatch(key)]
    if bad:
        raise ConfigError(f"{bad[0]}: ${{oc.env:...}} is only allowed in output_dir and data.sources.N.root "
                          "(its value would be written into config.yaml, the logs and the model card); "
                          f"pass the value as an override instead ({bad[0]}=VALUE)")


def build_run_config(layers: Sequence, overrides: Sequence[str] = ()) -> RunConfig:
    """``RunConfig`` from mappings ``layers`` (later wins) and dotted ``overrides``; raises ``ConfigError``."""
    node = merge_layers(RunConfig, layers, overrides)
    _refuse_published_env(node)
    _fill_model_from_preset(node)
    return instantiate(node, RunConfig)
