"""``depthpe bench rehearsal --config NAME --out DIR``: a recipe rehearsed end to end on the CPU at
its true model size, so that the first GPU hour cannot fail on a shape, a file size or a resume.

With nothing downloaded (``model.pretrained=false``, a random backbone) it writes a few small
synthetic scenes (``depthpe.scenes.synth``, wide enough for the training crops), then runs each stage
in a fresh process and reports its wall time, the peak resident memory of that process (and of any
process it waited for) and what it checked:

1. ``step 1``: ``depthpe.run.trainer.train`` at S views (default 2) of W px (default 224), batch 1,
   activation checkpointing on, fp32, on the CPU; after the checkpoint of step 1 the process is
   SIGKILLed;
2. ``step 2``: a fresh process resumes with ``--resume latest``; the model weights, optimizer state,
   ``TrainState``, RNG states and the sampler's next batches it restored must be bit-identical to
   what step 1's process had when it saved (sha256 digests, ``depthpe.bench.rehearsal_run``); it
   trains step 2, checkpoints and is SIGKILLed;
3. ``step 3``: resumes again (checked the same way) and trains one step under bf16 autocast on the
   CPU (``train.mixed_precision=bf16``), then exports ``final/``;
4. ``reload``: ``DepthModel.from_pretrained(final/)`` in a fresh process; its weights must equal
   the exported ones;
5. ``eval``: ``depthpe eval`` on 2 held-out scenes; ``predict``: ``depthpe predict`` on one scene's
   images with the scene file as cameras;
6. ``push``: ``depthpe push final/`` to ``--hub-endpoint`` (as ``HF_ENDPOINT``, with
   ``--hub-token`` as ``HF_TOKEN`` when given): the upload path of multi-GB files. Without an
   endpoint the stage is skipped and says so.

It also compares ``depthpe bench memory``'s prediction (``--target cpu``: the extra memory of a
steady-state step above what is live before it) with the measured growth of resident memory
during steps 2 (fp32) and 3 (bf16), both steady-state steps (the AdamW state exists). The training
processes run with ``MALLOC_MMAP_THRESHOLD_=65536`` so that freed tensors go back to the OS and
resident memory follows live tensors (as ``depthpe bench memory --measure`` does).

The table goes to stdout, everything to ``DIR/rehearsal.json``, each process's output to
``DIR/logs/``. Exit status 0 when every stage that ran passed, 1 otherwise. At true size
(``vggt1b_*``) it needs about 20 GB of memory, 40 GB of disk and 20-30 minutes on 2 cores; any
config runs, e.g. ``--config quickstart --image-width 42`` in well under a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from ..config.options import REQUIRED, add_plain_options, option, overwrite_option
from .rehearsal_run import read_events
from .settings import BenchedRun, config_option, overrides_option

DESCRIPTION = __doc__
TRAIN_SCENES, VAL_SCENES, SCENE_FRAMES = 2, 2, 4
DIGEST_NAMES = ("model", "optimizer", "train_state", "rng", "sampler")
GIB, MIB = 2**30, 2**20
STAGE_TIMEOUT_S = 3600.0  # seconds a stage's process may take


@dataclass
class RehearsalSettings(BenchedRun):
    """``depthpe bench rehearsal``: the run ``config`` (with ``overrides``, applied after the
    rehearsal's own) rehearsed in ``out`` at ``views`` views of ``image_width`` px with ``threads``
    torch threads, each stage's process stopped after ``stage_timeout`` s; pushed to
    ``hub_endpoint`` (with ``hub_token``, to ``hub_repo_id``) when one is given."""

    config: str = config_option("run config: a YAML file or a shipped config name (vggt1b_prope: true size)",
                                default=REQUIRED)
    overrides: list[str] = overrides_option("more dotted config overrides, applied last")
    out: str = option(REQUIRED, help="working folder (scenes, run, logs, rehearsal.json)")
    overwrite: bool = overwrite_option()
    views: int = option(2, help="views S per training sample")
    image_width: int = option(224, help="training width in px")
    threads: Optional[int] = option(None, help="torch threads of the training processes (none: the config's "
                                    "train.torch_threads)")
    hub_endpoint: Optional[str] = option(None, metavar="URL", help="Hub to push final/ to (HF_ENDPOINT of "
                                         "`depthpe push`); none: the push is skipped")
    hub_token: Optional[str] = option(None, help="token for --hub-endpoint (none: HF_TOKEN / login)")
    hub_repo_id: Optional[str] = option(None, metavar="ID",
                                        help="repository to push to (none: depthpe-rehearsal/<config name>)")
    stage_timeout: float = option(STAGE_TIMEOUT_S, help="seconds a stage's process may take before it is killed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``depthpe bench rehearsal``."""
    add_plain_options(parser, RehearsalSettings)


# ----------------------------------------------------------------------------- child processes
@dataclass
class ChildResult:
    """How a child process ended: exit status (negative: killed by that signal), wall seconds,
    peak resident memory (MiB, ``ru_maxrss`` of ``wait4``: the process and the children it waited
    for), whether the rehearsal killed it on purpose or for its timeout, and its log file."""

    status: int
    seconds: float
    peak_rss_mib: float
    killed: bool = False
    timed_out: bool = False
    log: str = ""


def run_child(argv: list[str], log: Path, *, env: dict | None = None, timeout: float = STAGE_TIMEOUT_S,
              kill_when=None) -> ChildResult:
    """Run ``argv`` in a new session with stdout and stderr in ``log``; SIGKILL its process group
    as soon as ``kill_when()`` is true, or after ``timeout`` seconds. ``os.wait4`` gives its peak RSS
    (subprocess does not), so the process is reaped here."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    killed = timed_out = False
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            timed_out = time.perf_counter() - t0 > timeout
            if timed_out or (kill_when is not None and kill_when()):
                killed = True
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
    except BaseException:  # Ctrl-C or a bug here: never leave the child running
        os.killpg(proc.pid, signal.SIGKILL)
        os.wait4(proc.pid, 0)
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ChildResult(proc.returncode, time.perf_counter() - t0, usage.ru_maxrss / 1024, killed and not timed_out,
                       timed_out, str(log))


def cli_argv(*args: str) -> list[str]:
    """The command line of ``depthpe ARGS...`` with this Python."""
    return [sys.executable, "-m", "depthpe.cli", *args]


# ----------------------------------------------------------------------------- what the stages run
@dataclass
class Stage:
    """One row of the report: ``ok`` None = skipped; ``notes``: what was measured and checked."""

    name: str
    ok: bool | None
    seconds: float | None = None
    peak_rss_mib: float | None = None
    notes: list[str] = field(default_factory=list)
    log: str = ""


def training_overrides(args, data_root: Path, run_dir: Path, precision: str) -> list[str]:
    """The dotted overrides that turn ``args.config`` into the rehearsal's run: random backbone
    (nothing downloaded), checkpointing, B = 1 x S square views of W px from the synthetic scenes,
    3 steps with a checkpoint after each (only the newest kept), CPU, ``precision`` ("fp32" |
    "bf16"), no validation, trackers or Hub pushes; ``args.overrides`` last."""
    S, W = args.views, args.image_width
    overrides = [
        "model.pretrained=false", "model.backbone_weights=null", "model.init_from=null",
        "model.gradient_checkpointing=true",
        f"data.sources=[{{name: synth, root: {data_root}, split: train}}]", f"data.views=[{S},{S}]",
        "data.aspect=[1.0,1.0]", f"data.image_width={W}", f"data.max_images_per_batch={S}",
        f"output_dir={run_dir}", "train.steps=3", "train.checkpoint_every=1", "train.keep_checkpoints=1",
        "train.num_workers=0", "train.cpu=true", "train.mixed_precision=" + ("bf16" if precision == "bf16" else "'no'"),
        "train.log_every=1", "train.report_to=[]", "val.sources=[]", "hub.repo_id=null",
    ]
    if args.threads:
        overrides.append(f"train.torch_threads={args.threads}")
    return overrides + list(args.overrides)


def scene_size(cfg) -> int:
    """Side (px, a multiple of 14) of the square synthetic scenes: wide enough that the smallest
    training crop (``data.crop_scale[0]`` of the image) is never upsampled to ``data.image_width``."""
    import math

    return 14 * math.ceil(cfg.data.image_width / min(cfg.data.crop_scale) / 14)


def check_args(args) -> object:
    """The resolved run config of the rehearsal (fp32); ``SystemExit`` with one line for bad options,
    ``ConfigError`` for a config (or ``--image-width``) the run would refuse."""
    from ..run import load_run_config

    if args.views < 2:
        raise SystemExit(f"--views must be >= 2 (the global attention needs two views), got {args.views}")
    if args.threads is not None and args.threads < 1:
        raise SystemExit(f"--threads must be >= 1, got {args.threads}")
    out = Path(args.out)
    cfg = load_run_config(args.config, training_overrides(args, out / "data", out / "run", "fp32"))  # ConfigError
    if (out / "run").exists():
        raise SystemExit(f"{out / 'run'} exists: give the rehearsal an empty --out folder")
    return cfg


def compare_restored(saved: dict | None, restored: dict | None) -> list[str]:
    """Problems of a resume: the names (``DIGEST_NAMES``) of the state that the resumed process
    restored differently from what the saving process held, a sampler that does not start at the
    restored step, or a missing record. Empty when the restore was exact."""
    if saved is None or restored is None:
        return [f"no record of the {'saved' if saved is None else 'restored'} state"]
    problems = [name for name in DIGEST_NAMES if saved["digests"].get(name) != restored["digests"].get(name)]
    if restored.get("sampler_start") != restored.get("step"):
        problems.append(f"sampler starts at step {restored.get('sampler_start')}, not {restored.get('step')}")
    return problems


def last_event(events: list[dict], name: str) -> dict | None:
    """The last event called ``name`` (None if there is none)."""
    return next((e for e in reversed(events) if e["event"] == name), None)


class Rehearsal:
    """The stages of one rehearsal (module docstring), run in order by ``run_all``; each appends a
    ``Stage`` to ``stages``. A failed synth or training stage ends the rehearsal (the later stages
    need its output); the stages after training run whatever the others did."""

    def __init__(self, args, cfg):
        self.args, self.cfg = args, cfg
        self.out = Path(args.out).resolve()
        self.data, self.run_dir = self.out / "data", self.out / "run"
        self.stages: list[Stage] = []
        self.events: dict[int, list[dict]] = {}  # training step -> events of its process
        self.memory: dict[str, dict] = {}  # precision -> {"predicted_mib", "measured_mib", "step"}

    def run_all(self) -> None:
        if not self.synth():
            return
        self.predict_memory()
        for step, precision in ((1, "fp32"), (2, "fp32"), (3, "bf16")):
            if not self.train_step(step, precision):
                return
        self.reload()
        self.evaluate()
        self.predict()
        self.push()

    def _stage(self, name: str, child: ChildResult | None, ok: bool | None, notes: list[str]) -> Stage:
        stage = Stage(name, ok, child.seconds if child else None, child.peak_rss_mib if child else None,
                      notes, child.log if child else "")
        self.stages.append(stage)
        return stage

    def synth(self) -> bool:
        side = scene_size(self.cfg)
        child = run_child(cli_argv("synth", "--out", str(self.data), "--train-scenes", str(TRAIN_SCENES),
                                   "--val-scenes", str(VAL_SCENES), "--views", str(SCENE_FRAMES), "--height",
                                   str(side), "--width", str(side), "--workers", "1", "--quiet"),
                          self.out / "logs" / "synth.log", timeout=self.args.stage_timeout)
        ok = child.status == 0
        self._stage(f"synthetic scenes ({TRAIN_SCENES} train + {VAL_SCENES} val, {SCENE_FRAMES} views of "
                    f"{side}x{side})", child, ok, [] if ok else [f"exit status {child.status}, see {child.log}"])
        return ok

    def predict_memory(self) -> None:
        """``depthpe bench memory``'s prediction (``--target cpu``) of the extra memory of one
        steady-state step of this run, fp32 and bf16 (in this process: fake tensors, no data)."""
        from depthpe.loader.sampling import target_size
        from .memory import Setting, predict

        t0 = time.perf_counter()
        height, width = target_size(1.0, self.args.image_width, self.cfg.model_config().patch_size)
        for precision in ("fp32", "bf16"):
            setting = Setting(self.cfg, self.args.views, 1, height, width, precision, True, "cpu")
            self.memory[precision] = {"predicted_mib": predict(setting)["extra"] / MIB}
        notes = [f"{p}: {m['predicted_mib'] / 1024:.2f} GiB above what is live before the step"
                 for p, m in self.memory.items()]
        stage = self._stage("memory prediction (`depthpe bench memory --target cpu`, this process)", None, True, notes)
        stage.seconds = time.perf_counter() - t0

    def train_step(self, step: int, precision: str) -> bool:
        """Stage of training step ``step`` in a fresh process (resuming from the previous one's
        checkpoint for ``step > 1``); True when it did what it should."""
        events_file = self.out / "events" / f"step{step}.jsonl"
        events_file.parent.mkdir(parents=True, exist_ok=True)
        last = step == 3
        spec = {"config": self.args.config, "events": str(events_file), "resume": None if step == 1 else "latest",
                "stop_after_checkpoint": None if last else step,
                "overrides": training_overrides(self.args, self.data, self.run_dir, precision)}
        spec_file = self.out / "events" / f"step{step}.spec.json"
        spec_file.write_text(json.dumps(spec, indent=1))
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", PYTHONUNBUFFERED="1")
        waiting = None if last else (lambda: last_event(read_events(events_file), "waiting_for_kill") is not None)
        child = run_child([sys.executable, "-m", "depthpe.bench.rehearsal_run", str(spec_file)],
                          self.out / "logs" / f"step{step}.log", env=env, timeout=self.args.stage_timeout,
                          kill_when=waiting)
        self.events[step] = events = read_events(events_file)
        problems, notes = self._training_notes(step, precision, events)
        ended = child.status == 0 if last else child.killed
        if not ended:
            problems.append(f"exit status {child.status}" + (" (timed out)" if child.timed_out else "")
                            + f", see {child.log}")
        how = "fresh process" if step == 1 else "fresh process, --resume latest"
        self._stage(f"step {step}, {precision}, {how}", child, not problems, problems + notes)
        return not problems

    def _training_notes(self, step: int, precision: str, events: list[dict]) -> tuple[list[str], list[str]]:
        """(problems, notes) of a training process from its events."""
        problems, notes = [], []
        start, trained = last_event(events, "start"), last_event(events, "step")
        if start:
            notes.append(f"start_run {start['seconds']:.1f} s")
        if step > 1:
            load = last_event(events, "load_state")
            if load:
                notes.append(f"checkpoint load {load['seconds']:.1f} s")
            differ = compare_restored(last_event(self.events.get(step - 1, []), "saved"), last_event(events, "restored"))
            problems += [f"restored state differs from the saved one: {', '.join(differ)}"] if differ else []
            notes += [] if differ else ["restored = saved (model, optimizer, train state, RNG, sampler)"]
        if trained is None:
            return problems + ["no training step finished"], notes
        notes.append(f"step {trained['seconds']:.1f} s, RSS +{trained['growth_mib'] / 1024:.2f} GiB "
                     f"(from {trained['rss_before_mib'] / 1024:.2f} GiB)")
        if step > 1:  # steady-state steps: the AdamW state exists, as the prediction assumes
            self.memory.setdefault(precision, {}).update(measured_mib=trained["growth_mib"], step=step)
        saved = last_event(events, "checkpoint")
        if saved:
            notes.append(f"checkpoint save {saved['seconds']:.1f} s, {saved['bytes'] / 1e9:.2f} GB, then SIGKILL")
        exported = last_event(events, "export")
        if exported:
            notes.append(f"export final/ {exported['seconds']:.1f} s, {exported['bytes'] / 1e9:.2f} GB")
        return problems, notes

    @property
    def final(self) -> Path:
        return self.run_dir / "final"

    def reload(self) -> None:
        """``DepthModel.from_pretrained(final/)`` in a fresh process; its weights must be the exported ones."""
        events_file = self.out / "events" / "reload.jsonl"
        spec_file = self.out / "events" / "reload.spec.json"
        spec_file.write_text(json.dumps({"reload": str(self.final), "events": str(events_file)}))
        child = run_child([sys.executable, "-m", "depthpe.bench.rehearsal_run", str(spec_file)],
                          self.out / "logs" / "reload.log", timeout=self.args.stage_timeout)
        loaded, exported = last_event(read_events(events_file), "reload"), last_event(self.events[3], "export")
        problems = [] if child.status == 0 and loaded else [f"exit status {child.status}, see {child.log}"]
        if loaded and exported and loaded["model"] != exported["model"]:
            problems.append("the reloaded weights differ from the exported ones")
        notes = [f"from_pretrained {loaded['seconds']:.1f} s, {loaded['parameters'] / 1e6:.0f} M parameters, "
                 "weights = exported"] if loaded and not problems else []
        self._stage("reload final/ (`DepthModel.from_pretrained`)", child, not problems, problems + notes)

    def evaluate(self) -> None:
        out = self.out / "eval"
        child = run_child(cli_argv("eval", "--model", str(self.final), "--data", str(self.data), "--split", "val",
                                   "--scenes", str(VAL_SCENES), "--views", str(self.args.views), "--out", str(out),
                                   "--num-workers", "0", "--cpu", "--panels", "1"),
                          self.out / "logs" / "eval.log", timeout=self.args.stage_timeout)
        ok = child.status == 0 and (out / "summary.json").is_file()
        self._stage(f"`depthpe eval` ({VAL_SCENES} scenes, {self.args.views} views)", child, ok,
                    [f"{out / 'summary.json'}"] if ok else [f"exit status {child.status}, see {child.log}"])

    def predict(self) -> None:
        images, cameras = self._prediction_input()
        out = self.out / "predict"
        child = run_child(cli_argv("predict", "--model", str(self.final), "--images", str(images), "--cameras",
                                   str(cameras), "--out", str(out), "--device", "cpu"),
                          self.out / "logs" / "predict.log", timeout=self.args.stage_timeout)
        ok = child.status == 0 and (out / "prediction.json").is_file()
        self._stage(f"`depthpe predict` (one scene, {SCENE_FRAMES} images)", child, ok,
                    [f"{out / 'prediction.json'}"] if ok else [f"exit status {child.status}, see {child.log}"])

    def _prediction_input(self) -> tuple[Path, Path]:
        """(images folder, cameras JSON) of the first val scene: its frames as PNG files and their
        cameras under the same names (a synth scene file names its cameras without an extension)."""
        import cv2

        from depthpe.scenes.cameras import read_scene_cameras
        from depthpe.scenes.format.scene_file import SceneReader, read_index
        from depthpe.scenes.cameras import FrameCamera, write_json_cameras

        split = self.data / "synth" / "val"
        scene = split / read_index(split)[0]["path"]
        images = self.out / "predict_input" / "images"
        images.mkdir(parents=True, exist_ok=True)
        cameras = []
        with SceneReader(scene) as reader:
            for i, (name, cam) in enumerate(read_scene_cameras(scene).items()):
                cv2.imwrite(str(images / f"{name}.png"), cv2.cvtColor(reader.read_image(i), cv2.COLOR_RGB2BGR))
                cameras.append(FrameCamera(f"{name}.png", cam.K, cam.w2c, cam.width, cam.height))
        return images, write_json_cameras(images.parent / "cameras.json", cameras)

    def push(self) -> None:
        """``depthpe push final/`` to ``--hub-endpoint`` (skipped without one)."""
        args = self.args
        if not args.hub_endpoint:
            self._stage("`depthpe push` (Hub upload)", None, None, ["no --hub-endpoint given"])
            return
        repo_id = args.hub_repo_id or f"depthpe-rehearsal/{Path(args.config).stem}"
        env = dict(os.environ, HF_ENDPOINT=args.hub_endpoint, HF_HUB_OFFLINE="0")
        if args.hub_token:
            env["HF_TOKEN"] = args.hub_token
        child = run_child(cli_argv("push", str(self.final), "--repo-id", repo_id, "--retries", "1",
                                   "--deadline", str(args.stage_timeout)),
                          self.out / "logs" / "push.log", env=env, timeout=args.stage_timeout + 60)
        size = sum(p.stat().st_size for p in self.final.iterdir() if p.is_file())
        ok = child.status == 0
        self._stage(f"`depthpe push` to {args.hub_endpoint}", child, ok,
                    [f"{repo_id}: {size / 1e9:.2f} GB, {size / 1e6 / child.seconds:.0f} MB/s"] if ok
                    else [f"exit status {child.status}, see {child.log}"])


# ----------------------------------------------------------------------------- report
def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def format_report(rehearsal: Rehearsal) -> str:
    """The printed report: one row per stage (wall s, peak RSS GiB, result) and the memory
    comparison (predicted vs measured growth of a steady-state step, and their ratio)."""
    a = rehearsal.args
    lines = [f"rehearsal of {a.config}: B=1 x S={a.views} views of {a.image_width} px, activation checkpointing, "
             f"CPU, random backbone (nothing downloaded)",
             "| stage | wall s | peak RSS GiB | result |", "|---|---|---|---|"]
    for s in rehearsal.stages:
        result = {True: "ok", False: "FAILED", None: "skipped"}[s.ok]
        lines.append(f"| {s.name} | {_cell(s.seconds, '.1f')} | "
                     f"{_cell(None if s.peak_rss_mib is None else s.peak_rss_mib / 1024, '.2f')} | "
                     f"{'; '.join([result, *s.notes])} |")
    lines += ["", "memory of one steady-state training step: `depthpe bench memory --target cpu` (extra above "
              "what is live before the step) vs the measured growth of resident memory",
              "| precision | step | predicted GiB | measured GiB | measured / predicted |", "|---|---|---|---|---|"]
    for precision, m in rehearsal.memory.items():
        predicted, measured = m.get("predicted_mib"), m.get("measured_mib")
        ratio = measured / predicted if predicted and measured is not None else None
        lines.append(f"| {precision} | {m.get('step', '-')} | {_cell(predicted and predicted / 1024, '.2f')} | "
                     f"{_cell(None if measured is None else measured / 1024, '.2f')} | {_cell(ratio, '.3f')} |")
    return "\n".join(lines)


def write_json(rehearsal: Rehearsal, path: Path) -> None:
    """Everything measured, as JSON (stages, memory comparison, events of the training processes)."""
    import platform

    import torch

    doc = {"config": rehearsal.args.config, "views": rehearsal.args.views, "image_width": rehearsal.args.image_width,
           "overrides": list(rehearsal.args.overrides), "torch": torch.__version__, "machine": platform.platform(),
           "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
           "stages": [asdict(s) for s in rehearsal.stages], "memory": rehearsal.memory,
           "events": {str(k): v for k, v in rehearsal.events.items()}}
    path.write_text(json.dumps(doc, indent=1))


def run(args: argparse.Namespace) -> int:
    """Run every stage, print the report, write ``rehearsal.json``; 0 when every stage that ran passed."""
    from ..files.output_folder import owned_output_folder, settings_fingerprint

    cfg = check_args(args)
    with owned_output_folder(args.out, "depthpe bench rehearsal", settings_fingerprint(args), replace=args.overwrite):
        return _rehearse(args, cfg)


def _rehearse(args: argparse.Namespace, cfg) -> int:
    """``run`` in the owned ``args.out``."""
    rehearsal = Rehearsal(args, cfg)
    try:
        rehearsal.run_all()
    finally:
        write_json(rehearsal, rehearsal.out / "rehearsal.json")
    print(format_report(rehearsal))
    return 0 if all(s.ok is not False for s in rehearsal.stages) else 1
