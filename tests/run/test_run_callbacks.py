"""Training hooks (``depthpe.run.callbacks``): the events of a tiny run, in order, with their
arguments; a raising callback stops the run with a ``CallbackError`` naming it."""

from pathlib import Path

import pytest

from depthpe.run.callbacks import CallbackError, Callbacks, TrainingCallback
from depthpe.run.trainer import train
from tests.helpers.training import run_config


class Recorder(TrainingCallback):
    """Records (event, step or None, details) and checks what each event promises."""

    def __init__(self):
        self.events = []

    def on_run_begin(self, cfg):
        self.events.append(("run_begin", None, cfg.train.steps))

    def on_restore_begin(self, checkpoint):
        self.events.append(("restore_begin", None, Path(checkpoint).name))

    def on_restored(self, checkpoint, state):
        self.events.append(("restored", state.step, Path(checkpoint).name))

    def on_run_start(self, run):
        self.events.append(("run_start", run.state.step, None))

    def on_step_begin(self, run):
        self.events.append(("step_begin", run.state.step, None))

    def on_step_end(self, run, result):
        self.events.append(("step_end", run.state.step, sorted(result.terms)))

    def on_validation(self, run, summary):
        self.events.append(("validation", run.state.step, sorted(summary)))
        self.summaries = getattr(self, "summaries", []) + [summary]

    def on_checkpoint_begin(self, run, final):
        self.events.append(("checkpoint_begin", run.state.step, final))

    def on_checkpoint_saved(self, run, folder, final):
        folder = Path(folder)
        on_disk = (folder / "model" / "model.safetensors").is_file() or (folder / "model.safetensors").is_file()
        self.events.append(("checkpoint_saved", run.state.step, (folder.name, final, on_disk)))

    def on_run_end(self, run, final):
        self.events.append(("run_end", run.state.step, Path(final).name))


VAL = {"every": 2, "views": 2, "max_scenes": 1}


def _val(root) -> dict:
    return {"sources": [{"name": "synth", "root": str(root), "split": "val"}], **VAL}


def test_events_in_order_with_their_arguments(synth_root, tmp_path):
    rec = Recorder()
    final = train(run_config(synth_root, tmp_path / "run", train={"steps": 4, "checkpoint_every": 2},
                             val=_val(synth_root)), callbacks=[rec])
    assert [e[0] for e in rec.events[:2]] == ["run_begin", "run_start"]
    terms = rec.events[3][2]
    step = lambda n: [("step_begin", n - 1, None), ("step_end", n, terms)]  # noqa: E731
    datasets = rec.events[6][2]
    assert datasets == ["synth"]
    assert rec.events == [
        ("run_begin", None, 4), ("run_start", 0, None), *step(1), *step(2), ("validation", 2, datasets),
        ("checkpoint_begin", 2, False), ("checkpoint_saved", 2, ("step_0000002", False, True)), *step(3), *step(4),
        ("checkpoint_begin", 4, True), ("checkpoint_saved", 4, ("final", True, True)), ("validation", 4, datasets),
        ("run_end", 4, "final")]
    assert "total" in terms and final.name == "final"
    summary = rec.summaries[0]["synth"]
    assert "abs_rel" in next(v for mode, v in summary.items() if mode != "loss")


def test_resume_hears_the_restore(synth_root, tmp_path):
    cfg = run_config(synth_root, tmp_path / "run", train={"steps": 2, "checkpoint_every": 1})
    train(cfg)
    rec = Recorder()
    train(run_config(synth_root, tmp_path / "run", train={"steps": 3, "checkpoint_every": 1}),
          resume="latest", callbacks=[rec])
    names = [e[0] for e in rec.events]
    assert names[:4] == ["run_begin", "restore_begin", "restored", "run_start"]
    # the last checkpoint of the first run is step 1 (step 2 is its end: final/)
    assert rec.events[1][2] == "step_0000001" and rec.events[2][1] == 1 and rec.events[3][1] == 1
    assert [e[1] for e in rec.events if e[0] == "step_end"] == [2, 3]


class Exploding(TrainingCallback):
    def on_step_end(self, run, result):
        raise ValueError("boom")


def test_a_raising_callback_is_a_clear_error(synth_root, tmp_path):
    with pytest.raises(CallbackError, match=r"training callback Exploding\.on_step_end failed at step 1: "
                                            r"ValueError: boom"):
        train(run_config(synth_root, tmp_path / "run", train={"steps": 2}), callbacks=[Exploding()])


def test_callbacks_must_be_training_callbacks():
    with pytest.raises(TypeError, match="is not a depthpe.run.callbacks.TrainingCallback"):
        Callbacks([lambda run: None])
    assert Callbacks().on_step_end(object(), None) is None  # no callbacks: every event is a no-op
    with pytest.raises(AttributeError):
        Callbacks().on_not_an_event


class Protector(TrainingCallback):
    """Claims to still read checkpoint ``step_0000001`` (as an upload in flight would); records the
    callbacks the run holds and the pre-emption event."""

    def __init__(self):
        self.held, self.stops = [], []

    def on_run_start(self, run):
        self.held = [type(cb).__name__ for cb in run.callbacks.callbacks]

    def on_stop(self, run, status):
        self.stops.append((run.state.step, status))

    def protects(self, path):
        return Path(path).name == "step_0000001"


def test_builtin_callbacks_come_first_and_rotation_spares_what_a_callback_protects(synth_root, tmp_path):
    guard = Protector()
    out = tmp_path / "run"
    train(run_config(synth_root, out, train={"steps": 4, "checkpoint_every": 1, "keep_checkpoints": 1}),
          callbacks=[guard])
    assert guard.held == ["TrackerLogging", "HubPushes", "Protector"]
    # keep_checkpoints=1 keeps the newest (step 3; step 4 is final/) and the protected step 1
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_0000001", "step_0000003"]
    assert guard.stops == []


def test_preemption_is_heard_as_on_stop_after_its_checkpoint(synth_root, tmp_path, monkeypatch):
    import signal

    import depthpe.run.losses as losses

    real, calls = losses.depth_loss, {"n": 0}

    def sigterm_on_second_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            signal.raise_signal(signal.SIGTERM)  # its handler has run when this returns
        return real(*args, **kwargs)

    monkeypatch.setattr(losses, "depth_loss", sigterm_on_second_step)
    guard, rec = Protector(), Recorder()
    with pytest.raises(SystemExit) as exit_info:
        train(run_config(synth_root, tmp_path / "run", train={"checkpoint_every": 0}), callbacks=[guard, rec])
    assert exit_info.value.code == 143 and guard.stops == [(2, 143)]
    assert [e[0] for e in rec.events[-2:]] == ["checkpoint_begin", "checkpoint_saved"]
    assert "run_end" not in [e[0] for e in rec.events]
