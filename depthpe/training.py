"""The Accelerate training loop (``train/train.py`` calls ``main``).

One readable loop: build the model, optimizer and step-indexed data loader; for each optimizer step
accumulate gradients over ``grad_accum`` micro-batches, skip the step if the loss or the gradients
are not finite, clip, step, set the learning rate from the schedule, log, validate, checkpoint.

Run directory layout (``output_dir``)::

    config.yaml                       resolved config of the run
    logs/                             TensorBoard event files
    checkpoints/step_0000500/         one checkpoint: Accelerate state (state/), exported model
                                      (model/: config.json + model.safetensors), trainer_state.json
    final/                            the exported final model (DepthModel.from_pretrained(...))

Resuming (``--resume latest`` or a checkpoint path) restores the model, optimizer and RNG states and
continues at the saved optimizer step; the learning rate is a pure function of the step and the
data sampler is indexed by the step, so a resumed run continues exactly like an uninterrupted one
(bit-for-bit on CPU in fp32, also after SIGKILL). Checkpoints are written to a temporary folder
(``checkpoints/.tmp_step_N``) and renamed when complete; a folder without ``trainer_state.json`` is
never picked by ``latest``, and leftovers of an interrupted save are removed when a run starts.

Distributed runs (``accelerate launch --num_processes N``): every process trains on its own slice of
one global batch per optimizer step of ``N * grad_accum * B`` samples (``depthpe.data.sampling``;
B = floor(data.max_images_per_batch / S) per process and micro-batch), and the loss is a mean of
per-sample losses (``depthpe.losses``), so N processes compute exactly the update of one process
with ``grad_accum`` multiplied by N. The main process writes the config, logs, checkpoints and the
final model; every process saves its own RNG state in each checkpoint (``state/random_states_<rank>.pkl``).

Bad data and numerics (counters in ``trainer_state.json``, TensorBoard ``counters/*`` and the final
summary, all summed over processes): ``skipped_files`` = sample draws that hit an unusable scene file
(missing, unreadable, corrupt, NaN/inf depth or cameras; each was redrawn from another scene),
``bad_files`` = distinct such files (each is named in the log when first seen), ``redraws`` = draws
rejected as degenerate or with too little valid depth, ``nonfinite_steps`` = optimizer steps skipped
because the loss or the gradients were not finite.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .config import dump_config, load_config
from .data.config import DataConfig, SourceConfig, dataclass_from_dict as _from_dict

__all__ = [
    "OptimConfig",
    "LossConfig",
    "TrainLoopConfig",
    "ValConfig",
    "HubConfig",
    "RunConfig",
    "lr_at",
    "find_checkpoint",
    "train",
    "main",
]


@dataclass
class OptimConfig:
    """AdamW and the learning-rate schedule (counted in optimizer steps).

    schedule: ``constant`` = linear warm-up from ``min_lr`` to ``lr`` over ``warmup_steps``, then
    constant (the DPPE paper's warmup-stable recipe); ``cosine`` = the same warm-up, then cosine
    decay to ``min_lr`` at the last step.
    """

    lr: float = 1e-4
    min_lr: float = 1e-6
    weight_decay: float = 0.05
    warmup_steps: int = 1000
    schedule: str = "constant"
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0

    def __post_init__(self):
        if self.schedule not in ("constant", "cosine"):
            raise ValueError(f"optim.schedule must be 'constant' or 'cosine', got {self.schedule!r}")
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"need 0 <= optim.min_lr <= optim.lr, got {self.min_lr}, {self.lr}")
        self.betas = tuple(float(b) for b in self.betas)


@dataclass
class LossConfig:
    """Weights of the depth loss terms (``depthpe.losses.depth_loss``)."""

    l1_weight: float = 1.0
    gradient_weight: float = 1.0
    gradient_scales: int = 4
    conf_weight: float = 0.0
    conf_alpha: float = 0.2


@dataclass
class TrainLoopConfig:
    """Loop settings. ``steps`` counts optimizer steps; each uses ``grad_accum`` micro-batches."""

    steps: int = 240_000
    grad_accum: int = 1
    mixed_precision: str = "no"  # no | bf16 | fp16
    num_workers: int = 4
    log_every: int = 50
    smoothing: float = 0.95  # EMA decay of the logged/progress-bar metrics
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    max_nonfinite_in_row: int = 20
    cpu: bool = False  # force CPU even when a GPU is present
    # torch intra-op threads when training on CPU; None = available cores minus data workers (at
    # least 1). Oversubscribing a small CPU (workers + threads > cores) makes steps many times slower.
    torch_threads: int | None = None


@dataclass
class ValConfig:
    """Periodic validation on held-out scenes (``every`` optimizer steps; 0 = only at the end)."""

    sources: list = field(default_factory=list)
    every: int = 1000
    views: int = 8
    max_scenes: int | None = 16
    image_width: int | None = None  # default: data.image_width
    panels: int = 2
    seed: int = 0

    def __post_init__(self):
        self.sources = [s if isinstance(s, SourceConfig) else SourceConfig.from_dict(s) for s in self.sources]


@dataclass
class HubConfig:
    """Pushing to the Hugging Face Hub (main process, background thread; see ``depthpe.hub``).

    repo_id: "user/name" (None = no pushes); private: visibility when the repo is created;
    push_every: push every Nth checkpoint (checkpoint number = step / train.checkpoint_every; the
    final model is always pushed); revision: branch to push to (None = main); license: licence of
    the weights on the model card; retries / retry_delay: attempts after a failure and the first
    back-off in seconds (doubling); wait_timeout: seconds to wait for uploads when training ends.
    """

    repo_id: str | None = None
    private: bool = False
    push_every: int = 1
    revision: str | None = None
    license: str = "apache-2.0"
    retries: int = 5
    retry_delay: float = 10.0
    wait_timeout: float = 1800.0

    def __post_init__(self):
        if self.push_every < 1:
            raise ValueError(f"hub.push_every must be >= 1 (every Nth checkpoint), got {self.push_every}")


@dataclass
class RunConfig:
    """A whole training run (the YAML file). ``model`` holds ``preset`` plus DepthModelConfig fields, and
    optionally ``init_from``: a VGGT-format checkpoint to start from (see ``build_model``)."""

    output_dir: str = "runs/default"
    seed: int = 0
    model: dict = field(default_factory=lambda: {"preset": "tiny"})
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainLoopConfig = field(default_factory=TrainLoopConfig)
    val: ValConfig = field(default_factory=ValConfig)
    hub: HubConfig = field(default_factory=HubConfig)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        d = dict(d)
        sections = {"data": DataConfig, "optim": OptimConfig, "loss": LossConfig,
                    "train": TrainLoopConfig, "val": ValConfig, "hub": HubConfig}
        for name, section_cls in sections.items():
            if name in d:
                d[name] = section_cls.from_dict(d[name]) if name == "data" else _from_dict(section_cls, dict(d[name] or {}), name)
        return _from_dict(cls, d, "config")

    def to_dict(self) -> dict:
        def plain(x):
            if isinstance(x, tuple):
                return [plain(v) for v in x]
            if isinstance(x, list):
                return [plain(v) for v in x]
            if isinstance(x, dict):
                return {k: plain(v) for k, v in x.items()}
            return x

        return plain(dataclasses.asdict(self))

    def model_config(self):
        """The ``DepthModelConfig`` of ``model`` (``preset`` + field overrides)."""
        from .model.config import DepthModelConfig

        fields = dict(self.model)
        preset = fields.pop("preset", None)
        fields.pop("init_from", None)  # issue 6: where the weights come from, not an architecture field
        if preset:
            return DepthModelConfig.from_preset(preset, **fields)
        return DepthModelConfig(**fields)


# --- init_from (issue 6): the model a run starts from
def build_model(cfg: RunConfig, *, resuming: bool = False):
    """A new ``DepthModel`` for ``cfg``. With ``model.init_from`` (a VGGT-format checkpoint: a Hub id
    such as ``facebook/VGGT-1B`` or a local .safetensors/.pt file) it is ``DepthModel.from_vggt`` with
    the run's model config, so the backbone comes from that checkpoint and timm downloads nothing;
    when ``resuming`` the checkpoint file is not read (the run's own checkpoint restores every weight)."""
    from .model import DepthModel

    init_from = cfg.model.get("init_from")
    config = cfg.model_config()
    if init_from and not resuming:
        return DepthModel.from_vggt(init_from, **config.to_dict())
    return DepthModel(config, load_backbone_weights=not init_from)


def init_weights_release(cfg: RunConfig) -> str | None:
    """The released weights named by ``model.init_from`` when it is a known Hub release
    (``depthpe.model_card.INIT_WEIGHTS``, e.g. ``facebook/VGGT-1B``), for the model card's licence;
    None otherwise (for a local copy of VGGT-1B set ``hub.license`` yourself)."""
    from .model_card import INIT_WEIGHTS

    init_from = cfg.model.get("init_from")
    return init_from if init_from in INIT_WEIGHTS else None
# --- end init_from


def lr_at(step: int, cfg: OptimConfig, total_steps: int) -> float:
    """Learning rate for optimizer step ``step`` (0-based): warm-up, then constant or cosine."""
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return cfg.min_lr + (cfg.lr - cfg.min_lr) * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    span = max(1, total_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * progress))


# ---------------------------------------------------------------------------------------- checkpoints
CHECKPOINT_PREFIX = "step_"
STATE_FILE = "trainer_state.json"


def _checkpoint_dirs(output_dir: Path) -> list[Path]:
    """Complete checkpoints (with trainer_state.json), oldest first."""
    root = output_dir / "checkpoints"
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.name.startswith(CHECKPOINT_PREFIX) and (p / STATE_FILE).is_file()
             and p.name[len(CHECKPOINT_PREFIX):].isdigit()]
    return sorted(found, key=lambda p: int(p.name[len(CHECKPOINT_PREFIX):]))


def find_checkpoint(output_dir: str | Path, resume: str) -> Path | None:
    """``resume`` = "latest" (newest complete checkpoint of the run, or None) or a checkpoint path."""
    if resume == "latest":
        dirs = _checkpoint_dirs(Path(output_dir))
        return dirs[-1] if dirs else None
    path = Path(resume)
    if not (path / STATE_FILE).is_file():
        raise FileNotFoundError(f"{path} is not a complete depthpe checkpoint (no {STATE_FILE})")
    return path


def _rotate_checkpoints(output_dir: Path, keep: int, protected=None) -> None:
    """Delete all but the newest ``keep`` checkpoints (keep <= 0: delete none), sparing those for
    which ``protected(path)`` is true (hub: an upload still reads them)."""
    for old in _checkpoint_dirs(output_dir)[:-keep] if keep > 0 else []:
        if protected is None or not protected(old):
            _remove_tree(old)


def _remove_tree(path: Path) -> None:
    """Delete a folder so that it disappears at once: rename it to ``.del_<name>``, then delete it (a
    kill during the deletion leaves only a dot-folder that no reader looks at)."""
    if not path.exists():
        return
    trash = path.with_name(f".del_{path.name.lstrip('.')}")
    shutil.rmtree(trash, ignore_errors=True)
    os.replace(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _remove_incomplete_checkpoints(output_dir: Path) -> list[str]:
    """Delete leftovers of interrupted saves or deletions (``checkpoints/.tmp_*``, ``.del_*``);
    returns their names. Call on the main process before training starts."""
    root = output_dir / "checkpoints"
    stale = sorted(p for p in root.glob(".*_" + CHECKPOINT_PREFIX + "*") if p.is_dir()) if root.is_dir() else []
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return [p.name for p in stale]


def _save_checkpoint(accelerator, model, output_dir: Path, step: int, trainer_state: dict, keep: int,
                     protected=None) -> Path:
    """Write checkpoints/step_N atomically and rotate old ones.

    Everything goes to ``checkpoints/.tmp_step_N`` first: the Accelerate state (every process saves
    its own RNG state there, ``state/random_states_<rank>.pkl``; the main process the rest), then
    on the main process the exported model and, last, ``trainer_state.json``; the folder is then
    renamed to ``step_N`` (atomic). A process killed at any point leaves either no ``step_N`` or a
    complete one. ``protected(path) -> bool``: checkpoints to keep for now (an upload still reads them).
    """
    root = output_dir / "checkpoints"
    final = root / f"{CHECKPOINT_PREFIX}{step:07d}"
    tmp = root / f".tmp_{CHECKPOINT_PREFIX}{step:07d}"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp / "state"))
    accelerator.wait_for_everyone()  # every rank's RNG file is on disk before the folder is published
    _export_model(accelerator, model, tmp / "model")
    if accelerator.is_main_process:
        (tmp / STATE_FILE).write_text(json.dumps(trainer_state, indent=1))
        _remove_tree(final)  # only when this step was saved before (a resumed run passing it again)
        os.replace(tmp, final)
        _rotate_checkpoints(output_dir, keep, protected)
    accelerator.wait_for_everyone()
    return final


def _export_model(accelerator, model, directory: Path) -> None:
    """Write the prepared model as a ``DepthModel.from_pretrained`` folder (config.json,
    model.safetensors). Call on every process: under FSDP the full state dict is gathered from all
    of them (``accelerator.get_state_dict``); the main process writes. Single-process, DDP and
    DeepSpeed ZeRO-2 runs use ``save_pretrained`` of the unwrapped model (which adds a model card)."""
    from accelerate.utils import DistributedType

    unwrapped = accelerator.unwrap_model(model)
    if accelerator.distributed_type == DistributedType.FSDP:  # sharded parameters: gather first
        from safetensors.torch import save_file

        from .model.depth_model import CONFIG_NAME, WEIGHTS_NAME

        state = accelerator.get_state_dict(model)
        if accelerator.is_main_process:
            directory.mkdir(parents=True, exist_ok=True)
            save_file({k: v.contiguous() for k, v in state.items()}, str(directory / WEIGHTS_NAME),
                      metadata={"format": "pt"})
            unwrapped.config.to_json(directory / CONFIG_NAME)
    elif accelerator.is_main_process:
        unwrapped.save_pretrained(directory)


# ---------------------------------------------------------------------------------------- the loop
class _Smoother:
    """Exponential moving averages of logged scalars (decay ``beta``, bias-corrected)."""

    def __init__(self, beta: float):
        self.beta, self.values, self.weights = beta, {}, {}

    def update(self, scalars: dict[str, float]) -> dict[str, float]:
        for k, v in scalars.items():
            if not math.isfinite(v):
                continue
            self.values[k] = self.beta * self.values.get(k, 0.0) + (1 - self.beta) * v
            self.weights[k] = self.beta * self.weights.get(k, 0.0) + (1 - self.beta)
        return self.get()

    def get(self) -> dict[str, float]:
        return {k: v / self.weights[k] for k, v in self.values.items()}

    def state(self) -> dict:
        return {"values": self.values, "weights": self.weights}

    def load(self, state: dict) -> None:
        self.values, self.weights = dict(state["values"]), dict(state["weights"])


def train(cfg: RunConfig, *, resume: str | None = None, resolved: dict | None = None) -> Path:
    """Run training as configured; returns the path of the exported final model."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedType, ProjectConfiguration, set_seed
    from tqdm.auto import tqdm

    from .data.dataset import build_train_loader
    from .evaluation import evaluate, format_summary
    from .losses import depth_loss

    t = cfg.train
    output_dir = Path(cfg.output_dir)
    accelerator = Accelerator(
        mixed_precision=t.mixed_precision,
        cpu=t.cpu,
        log_with="tensorboard",
        project_config=ProjectConfiguration(project_dir=str(output_dir), logging_dir=str(output_dir / "logs")),
    )
    set_seed(cfg.seed)
    if accelerator.device.type == "cpu":
        torch.set_num_threads(t.torch_threads or _default_cpu_threads(t.num_workers, accelerator.num_processes))
    main_proc = accelerator.is_main_process
    world = accelerator.num_processes
    if main_proc:
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / "config.yaml").write_text(dump_config(resolved or cfg.to_dict()))
        for name in _remove_incomplete_checkpoints(output_dir):
            print(f"removed {output_dir / 'checkpoints' / name}: an interrupted checkpoint save or deletion")
        print(f"world size {world} ({accelerator.distributed_type.value}, device {accelerator.device}, "
              f"mixed precision {accelerator.mixed_precision}); global batch per step = {world} process(es) x "
              f"{t.grad_accum} micro-batch(es) x floor({cfg.data.max_images_per_batch} / S) samples", flush=True)
    accelerator.wait_for_everyone()
    accelerator.init_trackers("train", config=_flat_hparams(cfg))

    # init_from (issue 6): the main process downloads the checkpoint first, the others read the cache
    resuming = bool(resume) and find_checkpoint(output_dir, resume) is not None
    with accelerator.main_process_first():
        model = build_model(cfg, resuming=resuming)
    optimizer = torch.optim.AdamW(model.param_groups(cfg.optim.weight_decay), lr=cfg.optim.lr, betas=cfg.optim.betas)
    model, optimizer = accelerator.prepare(model, optimizer)
    trainable = [p for p in model.parameters() if p.requires_grad]

    step, smoother = 0, _Smoother(t.smoothing)
    counters = {"nonfinite_steps": 0, "redraws": 0, "skipped_files": 0, "bad_files": 0, "images": 0}
    bad_files: dict[str, str] = {}  # distinct unusable scene files seen by any process -> reason
    ckpt = find_checkpoint(output_dir, resume) if resume else None
    if resume and ckpt is None and main_proc:
        print(f"--resume {resume}: no checkpoint in {output_dir}/checkpoints, starting from scratch")
    if ckpt is not None:
        accelerator.load_state(str(ckpt / "state"))
        state = json.loads((ckpt / STATE_FILE).read_text())
        step = state["step"]
        counters.update(state["counters"])
        bad_files.update(state.get("bad_files", {}))
        smoother.load(state["smoother"])
        if main_proc:
            print(f"resumed from {ckpt} at step {step}")
            saved_world = state.get("world_size", world)
            if saved_world != world:
                print(f"note: the checkpoint was written by {saved_world} process(es), this run has {world}: "
                      f"the global batch changes from {saved_world} to {world} x grad_accum x B per step")

    loader = build_train_loader(
        cfg.data, seed=cfg.seed, rank=accelerator.process_index, world_size=world,
        start_step=step, num_steps=t.steps, num_workers=t.num_workers, grad_accum=t.grad_accum,
    )
    batches = iter(loader)
    val_every = cfg.val.every if cfg.val.sources else 0
    # --- hub (issue 7): background pushes of checkpoints and the final model, main process only
    hub = None
    if main_proc and cfg.hub.repo_id:
        from .hub import TrainingPushes

        hub = TrainingPushes(cfg.hub, resolved or cfg.to_dict(), total_steps=t.steps,
                             checkpoint_every=t.checkpoint_every, output_dir=output_dir, log=tqdm.write,
                             init_weights=init_weights_release(cfg))
    # --- end hub

    def validate(at_step: int) -> None:
        result = evaluate(
            accelerator.unwrap_model(model), cfg.val.sources, views=cfg.val.views, seed=cfg.val.seed,
            image_width=cfg.val.image_width or cfg.data.image_width, max_scenes=cfg.val.max_scenes,
            accelerator=accelerator, panels=cfg.val.panels, progress=False,
        )
        if main_proc:
            scalars = {f"val/{ds}/{mode}/{k}": v[k] for ds, modes in result.summary.items()
                       for mode, v in modes.items() for k in ("abs_rel", "delta1") if k in v}
            accelerator.log(scalars, step=at_step)
            tb = accelerator.get_tracker("tensorboard", unwrap=True)
            for name, panel in result.panels:
                tb.add_image(f"val_panels/{name}", panel, at_step, dataformats="HWC")
            tqdm.write(f"validation at step {at_step}:\n{format_summary(result.summary, ('abs_rel', 'delta1'))}")
            if hub is not None:  # hub: the latest validation goes on the model card
                hub.record_validation(at_step, result.summary, scenes=cfg.val.max_scenes, views=cfg.val.views)

    bar = tqdm(total=t.steps, initial=step, desc="train", unit="step", disable=not main_proc, dynamic_ncols=True)
    nonfinite_in_row = 0
    stop = _StopRequest()  # SIGTERM (pre-emption): checkpoint at the end of the current step, then exit
    model.train()
    try:
        while step < t.steps:
            t0 = time.perf_counter()
            lr = lr_at(step, cfg.optim, t.steps)
            for group in optimizer.param_groups:
                group["lr"] = lr
            terms_sum: dict[str, torch.Tensor] = {}
            local_bad = False
            n_images = local_redraws = local_skipped = 0
            new_bad: list[tuple[str, str]] = []
            data_time = 0.0
            for micro in range(t.grad_accum):
                td = time.perf_counter()
                batch = next(batches)
                data_time += time.perf_counter() - td
                local_redraws += batch["redraws"]
                local_skipped += batch["skipped_files"]
                new_bad += [(p, r) for p, r in batch["bad_files"] if p not in bad_files]
                n_images += batch["images"].shape[0] * batch["images"].shape[1]
                sync = micro == t.grad_accum - 1
                ctx = accelerator.no_sync(model) if not sync else _nullcontext()
                with ctx:
                    with accelerator.autocast():
                        out = model(batch["images"].to(accelerator.device), batch["K"].to(accelerator.device),
                                    batch["w2c"].to(accelerator.device))
                    terms = depth_loss(
                        out["depth"], batch["depth"].to(accelerator.device), batch["valid"].to(accelerator.device),
                        out.get("conf"), l1_weight=cfg.loss.l1_weight, gradient_weight=cfg.loss.gradient_weight,
                        gradient_scales=cfg.loss.gradient_scales, conf_weight=cfg.loss.conf_weight,
                        conf_alpha=cfg.loss.conf_alpha,
                    )
                    loss = terms["total"] / t.grad_accum
                    if not torch.isfinite(loss):
                        local_bad = True
                        # Keep every process in the gradient all-reduce: back-propagate a zero loss.
                        loss = sum((p * 0).sum() for p in trainable) + 0 * out["depth"].sum().nan_to_num()
                    accelerator.backward(loss)
                for k, v in terms.items():
                    terms_sum[k] = terms_sum.get(k, 0.0) + v.detach().double() / t.grad_accum
            # One all-reduce per step: bad-loss flag, data counters and loss terms of all processes.
            stats = accelerator.reduce(torch.stack([
                torch.tensor(float(local_bad), dtype=torch.float64), torch.tensor(float(local_redraws), dtype=torch.float64),
                torch.tensor(float(local_skipped), dtype=torch.float64), *[v.cpu() for v in terms_sum.values()],
            ]).to(accelerator.device), reduction="sum").tolist()
            bad = stats[0] > 0
            counters["redraws"] += int(stats[1])
            counters["skipped_files"] += int(stats[2])
            terms_mean = {k: v / world for k, v in zip(terms_sum, stats[3:])}
            if stats[2] > 0:  # some process skipped a file: name the new ones once, on the main process
                _record_bad_files(accelerator, new_bad, bad_files, step, tqdm.write if main_proc else None)
                counters["bad_files"] = len(bad_files)
            grad_norm = math.nan
            if not bad:
                norm = accelerator.clip_grad_norm_(trainable, cfg.optim.grad_clip)
                grad_norm = math.nan if norm is None else float(norm)
                # DeepSpeed clips and steps inside backward() (its norm, if any, is only logged)
                bad = not math.isfinite(grad_norm) and accelerator.distributed_type != DistributedType.DEEPSPEED
            if bad:
                counters["nonfinite_steps"] += 1
                nonfinite_in_row += 1
                optimizer.zero_grad(set_to_none=True)
                if nonfinite_in_row >= t.max_nonfinite_in_row:
                    raise RuntimeError(
                        f"{nonfinite_in_row} optimizer steps in a row had a non-finite loss or gradient "
                        f"(step {step}); training stopped. Lower optim.lr, use mixed_precision=bf16 instead of "
                        "fp16, or run `depthpe check` on the data."
                    )
            else:
                nonfinite_in_row = 0
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            step += 1
            counters["images"] += n_images * world
            dt = time.perf_counter() - t0
            scalars = {f"loss/{k}": v for k, v in terms_mean.items()}
            scalars.update({"lr": lr, "grad_norm": grad_norm, "images_per_s": n_images * world / dt,
                            "data_time_fraction": data_time / dt})
            smooth = smoother.update(scalars)
            bar.update(1)
            bar.set_postfix(loss=f"{smooth.get('loss/total', math.nan):.4f}", lr=f"{lr:.2e}",
                            img_s=f"{smooth.get('images_per_s', 0):.1f}")
            if main_proc and (step % t.log_every == 0 or step == t.steps):
                logged = {f"smooth/{k}": v for k, v in smooth.items()}
                logged.update(scalars)
                logged.update({f"counters/{k}": v for k, v in counters.items()})
                accelerator.log(logged, step=step)
            if val_every and step % val_every == 0 and step < t.steps:
                validate(step)
            preempted = stop.requested(accelerator)
            if (t.checkpoint_every and step % t.checkpoint_every == 0 and step < t.steps) or preempted:
                ckpt_dir = _save_checkpoint(accelerator, model, output_dir, step,
                                            {"step": step, "counters": counters, "smoother": smoother.state(),
                                             "bad_files": bad_files, "world_size": world},
                                            t.keep_checkpoints, protected=hub.is_pending if hub else None)
                if hub is not None:  # hub: queue the upload of this checkpoint's exported model
                    hub.after_checkpoint(ckpt_dir, step)
            if preempted:
                bar.close()
                if main_proc:
                    print(f"SIGTERM received: checkpoint {ckpt_dir} written at step {step}; "
                          f"continue with --resume latest")
                accelerator.end_training()
                raise SystemExit(143)
    finally:
        stop.restore()
    bar.close()
    if cfg.val.sources:
        validate(step)
    final = output_dir / "final"
    tmp = output_dir / ".tmp_final"
    if main_proc:
        shutil.rmtree(tmp, ignore_errors=True)
    _export_model(accelerator, model, tmp)
    if main_proc:
        (tmp / STATE_FILE).write_text(json.dumps({"step": step, "counters": counters, "bad_files": bad_files,
                                                  "world_size": world}, indent=1))
        _remove_tree(final)
        os.replace(tmp, final)
        if hub is not None:  # hub: the final model goes to the repository root
            hub.after_final(final, step)
        print(f"training done: {step} steps on {world} process(es), {counters['nonfinite_steps']} skipped "
              f"(non-finite loss or gradients), {counters['redraws']} draws redrawn (degenerate or too little "
              f"valid depth), {counters['skipped_files']} draws skipped from {counters['bad_files']} unusable "
              f"scene file(s){': ' + ', '.join(sorted(bad_files)[:10]) if bad_files else ''}; final model in {final}")
    accelerator.wait_for_everyone()
    accelerator.end_training()
    if hub is not None:  # hub: wait (bounded by hub.wait_timeout) for uploads; never raises
        hub.finish()
        _rotate_checkpoints(output_dir, t.keep_checkpoints, protected=hub.is_pending)  # spared ones, now done
    return final


def _record_bad_files(accelerator, new_bad: list[tuple[str, str]], known: dict[str, str], step: int,
                      log=None) -> None:
    """Add the (path, reason) pairs that any process met this step to ``known`` (the same on every
    process afterwards) and ``log`` each file not known before. Call on every process together."""
    from accelerate.utils import gather_object

    found = gather_object(new_bad) if accelerator.num_processes > 1 else new_bad
    for path, reason in found:
        if path not in known:
            known[path] = reason
            if log is not None:
                log(f"step {step + 1}: skipping unusable scene file ({len(known)} so far): {reason}")


def _default_cpu_threads(num_workers: int, num_processes: int) -> int:
    """Cores of this machine per training process, minus the data workers of that process."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, num_processes) - num_workers)


class _StopRequest:
    """Records SIGTERM (pre-emption) instead of dying mid-step; all processes agree on stopping.

    ``requested(accelerator)`` is True on every process as soon as one of them received SIGTERM
    (a max-reduction, so ranks never diverge). ``restore()`` puts the previous handler back.
    """

    def __init__(self):
        import signal
        import threading

        self.flag = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        self.flag = True

    def requested(self, accelerator) -> bool:
        flag = torch.tensor(float(self.flag), device=accelerator.device)
        return bool(accelerator.reduce(flag, reduction="sum").item() > 0)

    def restore(self) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _flat_hparams(cfg: RunConfig) -> dict[str, Any]:
    """Scalar hyper-parameters for TensorBoard (nested keys joined with '.')."""
    out: dict[str, Any] = {}

    def walk(prefix: str, x):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        elif isinstance(x, (int, float, str, bool)):
            out[prefix] = x
        else:
            out[prefix] = str(x)

    d = cfg.to_dict()
    d.pop("data", None)
    d.pop("val", None)
    walk("", d)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line of ``train/train.py``: ``--config FILE [--resume latest|PATH] [key=value ...]``."""
    import argparse

    parser = argparse.ArgumentParser(
        description="Train a depthpe model. Launch with `accelerate launch train/train.py --config FILE` "
                    "(or plain python for one process).",
    )
    parser.add_argument("--config", required=True, help="YAML run config (see configs/)")
    parser.add_argument("--resume", default=None,
                        help="'latest' (newest complete checkpoint of output_dir) or a checkpoint folder")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.steps=100 model.global_pe=prope")
    args = parser.parse_args(argv)
    resolved = load_config(args.config, args.overrides)
    cfg = RunConfig.from_dict(resolved)
    train(cfg, resume=args.resume, resolved=cfg.to_dict())
    return 0
