"""The training process of ``depthpe bench rehearsal``: ``depthpe.run.trainer.train`` run unchanged
in this process and observed, started as ``python -m depthpe.bench.rehearsal_run SPEC.json``.

SPEC.json: {"config", "overrides" (dotted key=value list), "resume" (null or "latest"),
"stop_after_checkpoint" (a step or null), "events" (path of the JSON-lines file this process
appends to)}; or {"reload": exported model folder, "events"}.

What is observed, each as one JSON line in the events file (written and flushed at once, so a
line survives the SIGKILL that ends this process):

* ``start``: seconds of ``start_run`` (model built, checkpoint restored, loader built);
* ``load_state`` (resumed runs): seconds of restoring the checkpoint (``Accelerator.load_state``
  reading ``state/``, then ``trainer_state.json``);
* ``restored`` (resumed runs): digests of the state the run restored (``state_digests``), taken
  right after ``start_run``, with the RNG digest taken just after the restore (before the loader
  is built, before anything draws a random number);
* ``step``: seconds of each optimizer step and its resident-memory growth: ``VmHWM`` after the
  step (reset through ``/proc/self/clear_refs`` just before it) minus ``VmRSS`` before it, in MiB
  (meaningful with ``MALLOC_MMAP_THRESHOLD_=65536`` in the environment, which the rehearsal sets);
* ``saved`` then ``checkpoint``: the digests of the state about to be saved, then the seconds and
  bytes of ``checkpoints/step_N``; after the checkpoint of ``stop_after_checkpoint`` the process
  reports ``waiting_for_kill`` and sleeps until the rehearsal SIGKILLs it;
* ``export``: seconds, bytes and model digest of ``final/``; ``reload``: seconds of
  ``DepthModel.from_pretrained`` and the digest of the weights it loaded.

The observer is a ``depthpe.run.callbacks.TrainingCallback`` passed as
``train(cfg, callbacks=[...])``: the rehearsal runs the real training loop and times each part
from its ``*_begin`` event to its end event.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ..run.callbacks import TrainingCallback

__all__ = ["Events", "read_events", "state_digests", "tensor_digest", "rng_digest", "sampler_digest", "folder_bytes",
           "main"]


class Events:
    """Appends one JSON object per line to ``path``, flushed and fsynced at once."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def emit(self, event: str, **fields) -> None:
        import os

        with open(self.path, "a") as f:
            f.write(json.dumps({"event": event, **fields}) + "\n")
            f.flush()
            os.fsync(f.fileno())


def read_events(path: str | Path) -> list[dict]:
    """The events a rehearsal process wrote (an unfinished last line is ignored)."""
    path = Path(path)
    if not path.is_file():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events


# ----------------------------------------------------------------------------- digests
def tensor_digest(tensors) -> str:
    """sha256 over the bytes, dtypes and shapes of ``tensors`` (an iterable, in order): equal digests
    mean bit-identical tensors. Hashes each tensor's memory without copying it when contiguous."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().data if t.numel() else b"")
    return h.hexdigest()


def _json_digest(doc) -> str:
    """sha256 of ``doc`` as canonical JSON (tuples as lists)."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def rng_digest() -> str:
    """Digest of the RNG states a checkpoint saves and restores: torch (CPU), numpy and Python."""
    kind, keys, pos, gauss_next, cached = np.random.get_state()
    h = hashlib.sha256(torch.get_rng_state().numpy().tobytes())
    h.update(np.ascontiguousarray(keys).tobytes())
    h.update(json.dumps([kind, int(pos), int(gauss_next), float(cached), random.getstate()]).encode())
    return h.hexdigest()


def optimizer_digest(optimizer) -> str:
    """Digest of an optimizer's ``state_dict``: every state tensor (by parameter index and name) and
    the hyper-parameters of its groups."""
    sd = optimizer.state_dict()
    names = [(i, k) for i in sorted(sd["state"]) for k in sorted(sd["state"][i])]
    as_tensor = [v if torch.is_tensor(v) else torch.tensor(v) for v in (sd["state"][i][k] for i, k in names)]
    groups = [{k: v for k, v in g.items()} for g in sd["param_groups"]]
    return _json_digest([tensor_digest(as_tensor), [f"{i}.{k}" for i, k in names], groups])


def sampler_digest(sampler, step: int) -> str:
    """Digest of the sample keys (scene, views, size, seed) that the training sampler
    (``DynamicBatchSampler``) draws for 0-based optimizer step ``step``: the same digest means the
    same batches from there on (the sampler is a pure function of the seed and the step)."""
    return _json_digest([[int(v) for v in key] for key in sampler.batch_at(step)])


def state_digests(run, rng: str, sampler) -> dict:
    """Digests of what a checkpoint holds for ``run`` (a ``depthpe.run.trainer.Run``): model weights,
    optimizer state, ``TrainState``, RNG (``rng``, taken by the caller) and the batches of the next
    step drawn by ``sampler`` (the run's ``DynamicBatchSampler``)."""
    model = run.accelerator.unwrap_model(run.model)
    sd = model.state_dict()
    return {"model": tensor_digest(sd[k] for k in sorted(sd)), "optimizer": optimizer_digest(run.optimizer),
            "train_state": _json_digest(run.state.to_json()), "rng": rng,
            "sampler": sampler_digest(sampler, run.state.step)}


def folder_bytes(folder: str | Path) -> int:
    """Total size of the files under ``folder`` (bytes)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


# ----------------------------------------------------------------------------- the observed run
def _model_digest(run) -> str:
    sd = run.accelerator.unwrap_model(run.model).state_dict()
    return tensor_digest(sd[k] for k in sorted(sd))


class TrainingObserver(TrainingCallback):
    """A ``depthpe.run.callbacks.TrainingCallback`` that times the run's parts and reports them to
    ``events`` (module docstring); phases are timed from their ``*_begin`` event."""

    def __init__(self, spec: dict, events: Events):
        self.spec, self.events = spec, events
        self.precision = "bf16" if _override(spec, "train.mixed_precision") == "bf16" else "fp32"
        self.rng, self.resumed_from = None, None  # taken right after a restore, before anything draws from the RNGs
        self.began: dict[str, float] = {}
        self.step_memory = None  # (VmRSS before in MiB, whether the peak could be reset)

    def _seconds(self, phase: str) -> float:
        return time.perf_counter() - self.began.pop(phase)

    def on_run_begin(self, cfg) -> None:
        self.began["start"] = time.perf_counter()

    def on_restore_begin(self, checkpoint) -> None:
        self.began["load_state"], self.resumed_from = time.perf_counter(), str(checkpoint)

    def on_restored(self, checkpoint, state) -> None:
        self.events.emit("load_state", seconds=self._seconds("load_state"))
        self.rng = rng_digest()

    def on_run_start(self, run) -> None:
        sampler = run.loader.batch_sampler
        self.events.emit("start", seconds=self._seconds("start"), step=run.state.step, resumed_from=self.resumed_from)
        if self.resumed_from is not None:
            self.events.emit("restored", step=run.state.step, sampler_start=sampler.start_step,
                             digests=state_digests(run, self.rng, sampler))

    def on_step_begin(self, run) -> None:
        from .attention import _reset_peak_rss, _status_mib

        reset = _reset_peak_rss()
        self.step_memory = (_status_mib("VmRSS"), reset)
        self.began["step"] = time.perf_counter()

    def on_step_end(self, run, result) -> None:
        from .attention import _status_mib

        seconds, peak = self._seconds("step"), _status_mib("VmHWM")
        before, reset = self.step_memory
        self.events.emit("step", step=run.state.step, seconds=seconds, precision=self.precision,
                         rss_before_mib=before, peak_mib=peak, growth_mib=peak - before, hwm_reset=reset,
                         loss=result.terms.get("total"))

    def on_checkpoint_begin(self, run, final: bool) -> None:
        if not final:
            self.events.emit("saved", step=run.state.step,
                             digests=state_digests(run, rng_digest(), run.loader.batch_sampler))
        self.began["checkpoint"] = time.perf_counter()

    def on_checkpoint_saved(self, run, folder, final: bool) -> None:
        seconds = self._seconds("checkpoint")
        if final:
            self.events.emit("export", seconds=seconds, bytes=folder_bytes(folder), path=str(folder),
                             model=_model_digest(run))
            return
        self.events.emit("checkpoint", step=run.state.step, seconds=seconds, bytes=folder_bytes(folder),
                         path=str(folder))
        if self.spec.get("stop_after_checkpoint") == run.state.step:
            self.events.emit("waiting_for_kill", step=run.state.step)
            while True:  # the rehearsal SIGKILLs this process now
                time.sleep(1)


def _override(spec: dict, key: str) -> str | None:
    """The value of the last ``key=value`` override in ``spec`` (None if absent)."""
    values = [o.split("=", 1)[1] for o in spec.get("overrides", []) if o.split("=", 1)[0] == key]
    return values[-1] if values else None


def train_observed(spec: dict) -> None:
    """Run ``depthpe.run.trainer.train`` for ``spec`` (module docstring) with a ``TrainingObserver``."""
    from ..run import load_run_config, trainer

    cfg = load_run_config(spec["config"], spec.get("overrides", []))
    trainer.train(cfg, resume=spec.get("resume"), callbacks=[TrainingObserver(spec, Events(spec["events"]))])


def reload_observed(spec: dict) -> None:
    """Time ``DepthModel.from_pretrained(spec["reload"])`` and digest the weights it loaded."""
    from ..model import DepthModel

    t0 = time.perf_counter()
    model = DepthModel.from_pretrained(spec["reload"])
    seconds = time.perf_counter() - t0
    sd = model.state_dict()
    Events(spec["events"]).emit("reload", seconds=seconds, model=tensor_digest(sd[k] for k in sorted(sd)),
                                parameters=sum(p.numel() for p in model.parameters()))


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m depthpe.bench.rehearsal_run SPEC.json``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m depthpe.bench.rehearsal_run SPEC.json (started by depthpe bench rehearsal)",
              file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    if "reload" in spec:
        reload_observed(spec)
    else:
        train_observed(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
