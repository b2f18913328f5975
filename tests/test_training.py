import json
import math

import pytest
import torch
from safetensors.torch import load_file

from depthpe.config import apply_overrides, load_config
from depthpe.training import OptimConfig, RunConfig, find_checkpoint, lr_at, train

MICRO_MODEL = dict(preset="tiny", backbone_blocks=1, embed_dim=32, num_blocks=4, num_heads=2,
                   head_features=16, head_out_channels=[8, 16, 32, 32], head_layers=[0, 1, 2, 3])


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory):
    from depthpe.data.synth import write_synth_dataset

    root = tmp_path_factory.mktemp("data")
    write_synth_dataset(root, train_scenes=3, val_scenes=2, views=4, height=56, width=56, seed=0, progress=False)
    return root


def run_config(root, out, **sections):
    d = {
        "output_dir": str(out),
        "seed": 0,
        "model": dict(MICRO_MODEL),
        "data": {"sources": [{"name": "synth", "root": str(root), "split": "train"}], "views": [2, 3],
                 "aspect": [0.5, 1.0], "image_width": 42, "max_images_per_batch": 6},
        "optim": {"lr": 1e-3, "warmup_steps": 2},
        "train": {"steps": 4, "num_workers": 0, "log_every": 1, "checkpoint_every": 2, "cpu": True},
        "val": {"sources": [], "every": 0},
    }
    for k, v in sections.items():
        d[k] = {**d.get(k, {}), **v} if isinstance(v, dict) else v
    return RunConfig.from_dict(d)


def test_micro_model_preset_is_valid():
    cfg = RunConfig.from_dict({"model": dict(MICRO_MODEL)}).model_config()
    assert cfg.embed_dim == 32 and cfg.head_layers == [0, 1, 2, 3]


def test_lr_schedule():
    cfg = OptimConfig(lr=1e-3, min_lr=1e-5, warmup_steps=10, schedule="constant")
    assert lr_at(0, cfg, 100) == pytest.approx(1e-5 + (1e-3 - 1e-5) / 10)
    assert lr_at(9, cfg, 100) == pytest.approx(1e-3)
    assert lr_at(50, cfg, 100) == 1e-3
    cos = OptimConfig(lr=1e-3, min_lr=1e-5, warmup_steps=10, schedule="cosine")
    assert lr_at(10, cos, 110) == pytest.approx(1e-3)
    assert lr_at(60, cos, 110) == pytest.approx(1e-5 + 0.5 * (1e-3 - 1e-5))
    assert lr_at(110, cos, 110) == pytest.approx(1e-5)
    with pytest.raises(ValueError, match="schedule"):
        OptimConfig(schedule="linear")


def test_config_file_overrides_and_unknown_keys(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("output_dir: a\ntrain: {steps: 3}\nmodel: {preset: tiny}\n")
    d = load_config(path, ["train.steps=7", "optim.lr=2e-4", "model.global_pe=none"])
    cfg = RunConfig.from_dict(d)
    assert cfg.train.steps == 7 and cfg.optim.lr == 2e-4 and cfg.model_config().global_pe == "none"
    with pytest.raises(ValueError, match="unknown keys \\['stepz'\\]"):
        RunConfig.from_dict(apply_overrides(d, ["train.stepz=1"]))
    with pytest.raises(ValueError, match="key.subkey=value"):
        apply_overrides(d, ["train.steps"])
    with pytest.raises(FileNotFoundError, match="configs/"):
        load_config(tmp_path / "missing.yaml")


def test_few_steps_reduce_loss_on_fixed_batch(synth_root):
    from depthpe.data.dataset import build_train_loader
    from depthpe.losses import depth_loss
    from depthpe.model import DepthModel

    torch.manual_seed(0)
    cfg = run_config(synth_root, "unused")
    batch = next(iter(build_train_loader(cfg.data, seed=0, num_workers=0)))
    model = DepthModel(cfg.model_config())
    opt = torch.optim.AdamW(model.param_groups(0.0), lr=2e-3)
    losses = []
    for _ in range(12):
        out = model(batch["images"], batch["K"], batch["w2c"])
        loss = depth_loss(out["depth"], batch["depth"], batch["valid"])["total"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.85 * losses[0], losses


def test_train_writes_run_and_resume_is_bit_exact(synth_root, tmp_path):
    out = tmp_path / "run"
    cfg = run_config(synth_root, out)
    final = train(cfg)
    assert (out / "config.yaml").is_file() and list((out / "logs").rglob("events.out.tfevents*"))
    assert (final / "config.json").is_file() and (final / "model.safetensors").is_file()
    ckpt = find_checkpoint(out, "latest")
    assert ckpt.name == "step_0000002" and (ckpt / "model" / "model.safetensors").is_file()
    uninterrupted = load_file(final / "model.safetensors")

    resumed_final = train(run_config(synth_root, out), resume=str(ckpt))
    resumed = load_file(resumed_final / "model.safetensors")
    assert uninterrupted.keys() == resumed.keys()
    for k in uninterrupted:
        assert torch.equal(uninterrupted[k], resumed[k]), k
    state = json.loads((resumed_final / "trainer_state.json").read_text())
    assert state["step"] == 4
    # the checkpoint of step 2 differs from the final weights (training really continued)
    at2 = load_file(ckpt / "model" / "model.safetensors")
    assert any(not torch.equal(at2[k], uninterrupted[k]) for k in at2)


def test_checkpoint_rotation_and_latest_skips_incomplete(synth_root, tmp_path):
    out = tmp_path / "run"
    train(run_config(synth_root, out, train={"steps": 7, "checkpoint_every": 2, "keep_checkpoints": 2}))
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == ["step_0000004", "step_0000006"]
    (out / "checkpoints" / "step_0000009").mkdir()  # incomplete: no trainer_state.json
    assert find_checkpoint(out, "latest").name == "step_0000006"
    with pytest.raises(FileNotFoundError, match="not a complete depthpe checkpoint"):
        find_checkpoint(out, str(out / "checkpoints" / "step_0000009"))


def test_nonfinite_loss_is_skipped_and_counted(synth_root, tmp_path, monkeypatch):
    import depthpe.losses as losses

    real = losses.depth_loss
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        terms = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:
            terms["total"] = terms["total"] * math.nan
        return terms

    monkeypatch.setattr(losses, "depth_loss", flaky)
    final = train(run_config(synth_root, tmp_path / "run", train={"steps": 3, "checkpoint_every": 0}))
    state = json.loads((final / "trainer_state.json").read_text())
    assert state["counters"]["nonfinite_steps"] == 1
    weights = load_file(final / "model.safetensors")
    assert all(torch.isfinite(w).all() for w in weights.values())

    monkeypatch.setattr(losses, "depth_loss", lambda *a, **k: {**real(*a, **k), "total": torch.tensor(math.nan, requires_grad=True)})
    with pytest.raises(RuntimeError, match="in a row had a non-finite loss"):
        train(run_config(synth_root, tmp_path / "run2",
                         train={"steps": 5, "checkpoint_every": 0, "max_nonfinite_in_row": 3}))


def test_base_configs_merge_and_every_shipped_config_is_valid(tmp_path):
    from pathlib import Path

    (tmp_path / "a.yaml").write_text("output_dir: a\nmodel: {preset: tiny, global_pe: rope}\ntrain: {steps: 3}\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\nmodel: {global_pe: prope}\n")
    merged = load_config(tmp_path / "b.yaml")
    assert merged["model"] == {"preset": "tiny", "global_pe": "prope"} and merged["train"] == {"steps": 3}
    (tmp_path / "c.yaml").write_text("base: c.yaml\n")
    with pytest.raises(ValueError, match="circular"):
        load_config(tmp_path / "c.yaml")
    configs = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))
    assert len(configs) >= 12
    for path in configs:
        cfg = RunConfig.from_dict(load_config(path))
        model_cfg = cfg.model_config()
        expected = path.stem.split("_", 1)[1] if "_" in path.stem else "rope"
        if expected != "rope" and not expected.startswith("rope"):
            assert model_cfg.global_pe == expected, path
        assert cfg.data.sources, path


def test_sigterm_writes_a_checkpoint_and_resume_matches(synth_root, tmp_path, monkeypatch):
    """Pre-emption: SIGTERM during step 2 -> checkpoint of step 2, exit 143; --resume latest then
    ends with the same weights as an uninterrupted run."""
    import os
    import signal

    import depthpe.losses as losses

    reference = load_file(train(run_config(synth_root, tmp_path / "ref", train={"checkpoint_every": 0}))
                          / "model.safetensors")
    real = losses.depth_loss
    calls = {"n": 0}

    def preempt_on_second_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(losses, "depth_loss", preempt_on_second_step)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        train(run_config(synth_root, out, train={"checkpoint_every": 0}))
    assert exit_info.value.code == 143
    assert find_checkpoint(out, "latest").name == "step_0000002"
    assert not (out / "final").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler restored
    monkeypatch.setattr(losses, "depth_loss", real)
    resumed = load_file(train(run_config(synth_root, out, train={"checkpoint_every": 0}), resume="latest")
                        / "model.safetensors")
    for k in reference:
        assert torch.equal(reference[k], resumed[k]), k
