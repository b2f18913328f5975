"""`depthpe bench memory`: the fake-tensor prediction of training-step memory.

The slow test compares the prediction with the measured peak of the same real step on this CPU
(fresh subprocesses, as docs/benchmarks.md "Memory" reports); the others check the breakdown's
bookkeeping and the effect of checkpointing and precision on tiny configs (a few seconds each)."""

import argparse
import json

import pytest

from depthpe.bench import memory
from depthpe.cli import main

MIB = 2**20


def _setting(*argv: str) -> memory.Setting:
    parser = argparse.ArgumentParser()
    memory.add_arguments(parser)
    return memory.setting_from_args(parser.parse_args(["--config", "quickstart", *argv]))


@pytest.fixture(scope="module")
def tiny_predictions():
    """Predictions of the tiny preset at 8 views of 112 px: checkpointing off/on, fp32 and bf16."""
    base = ("--views", "8", "--batch", "1", "--image-width", "112")
    return {
        (ckpt, prec): memory.predict(_setting(*base, "--checkpointing", ckpt, "--precision", prec))
        for ckpt, prec in (("off", "fp32"), ("on", "fp32"), ("off", "bf16"))
    }


def test_breakdown_bookkeeping(tiny_predictions):
    r = tiny_predictions[("off", "fp32")]
    assert r["params_trainable"] > 0 and r["params_frozen"] > 0
    assert r["grads"] == r["params_trainable"]  # fp32 gradients of the trainable parameters only
    # AdamW: exp_avg and exp_avg_sq per trainable parameter, plus one scalar step per parameter
    assert 2 * r["params_trainable"] <= r["optimizer"] < 2 * r["params_trainable"] + 4096
    parts = r["params_trainable"] + r["params_frozen"] + r["buffers"] + r["optimizer"] + r["batch"]
    assert r["persistent"] == pytest.approx(parts, rel=0.01)
    assert r["peak"] == r["persistent"] + r["extra"] and r["saved"] > 0


def test_checkpointing_and_bf16_save_activation_memory(tiny_predictions):
    off, on, bf16 = (tiny_predictions[k] for k in (("off", "fp32"), ("on", "fp32"), ("off", "bf16")))
    assert on["saved"] < 0.8 * off["saved"]
    assert bf16["saved"] < off["saved"]
    assert on["persistent"] == off["persistent"] == bf16["persistent"]  # same weights and state


def test_activations_grow_with_views_and_batch():
    small = memory.predict(_setting("--views", "4", "--batch", "1", "--image-width", "84"))
    big = memory.predict(_setting("--views", "4", "--batch", "2", "--image-width", "84"))
    assert 1.7 < big["saved"] / small["saved"] < 2.3
    assert big["persistent"] - small["persistent"] == pytest.approx(small["batch"], rel=0.01)


def test_ddp_adds_one_copy_of_the_trainable_gradients(tiny_predictions):
    plain = tiny_predictions[("off", "fp32")]
    ddp = memory.predict(_setting("--views", "8", "--batch", "1", "--image-width", "112",
                                  "--checkpointing", "off", "--precision", "fp32", "--ddp"))
    assert ddp["ddp_buckets"] == plain["grads"] and plain["ddp_buckets"] == 0
    # the tracker rounds every allocation up to 512 bytes, as the CUDA allocator does
    assert ddp["persistent"] - plain["persistent"] == pytest.approx(ddp["ddp_buckets"], rel=0.01)
    # the peaks move by the buckets up to when Python's cycle collector frees some temporaries
    assert ddp["peak"] - plain["peak"] == pytest.approx(ddp["ddp_buckets"], rel=0.15)


def test_cli_report_and_json(tmp_path, capsys):
    out_json = tmp_path / "results" / "new" / "memory.json"  # its folder is created
    assert main(["bench", "memory", "--config", "quickstart", "--views", "4", "--image-width", "84",
                 "--quiet", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "| peak (allocated) |" in out and "24 GB:" in out
    data = json.loads(out_json.read_text())
    assert data["setting"]["views"] == 4 and data["setting"]["target"] == "cuda"
    assert data["predicted_bytes"]["peak"] > data["predicted_bytes"]["persistent"]


@pytest.mark.parametrize("argv, message", [
    (["--config", "no/such/config.yaml"], "does not exist"),
    (["--config", "quickstart", "--views", "1"], "--views must be >= 2"),
    (["--config", "quickstart", "--batch", "0"], "--batch must be >= 1"),
    (["--config", "quickstart", "--image-width", "100"], "multiple of the patch size"),
])
def test_bad_input_is_one_line(argv, message):
    parser = argparse.ArgumentParser()
    memory.add_arguments(parser)
    with pytest.raises(SystemExit, match=message):
        memory.setting_from_args(parser.parse_args(argv))


VALIDATION = [  # tiny preset, fp32: (views, batch, width, checkpointing)
    ("8", "1", "84", "off"),
    ("8", "1", "168", "on"),
    ("4", "2", "224", "off"),
]


@pytest.mark.slow
@pytest.mark.parametrize("views, batch, width, ckpt", VALIDATION)
def test_prediction_within_15_percent_of_measured_cpu_peak(views, batch, width, ckpt):
    parser = argparse.ArgumentParser()
    memory.add_arguments(parser)
    args = parser.parse_args(["--config", "quickstart", "--views", views, "--batch", batch,
                              "--image-width", width, "--checkpointing", ckpt, "--precision", "fp32",
                              "--measure"])
    setting = memory.setting_from_args(args)
    predicted = memory.predict(setting)["extra"] / MIB
    measured = memory.measure_cpu(args, setting)
    assert measured["hwm_reset"]
    assert predicted == pytest.approx(measured["extra_mib"], rel=0.15)


@pytest.mark.slow
def test_largest_batch_fits_and_the_next_does_not(monkeypatch):
    """The answer is the largest B whose predicted peak fits, and B + 1 was predicted and does not fit;
    only B varies. (The predictions ``largest`` makes are recorded here, not made a second time.)"""
    from depthpe.bench import memory_report

    real, peaks = memory_report.predict, {}

    def recorded(setting):
        result = real(setting)
        peaks[(setting.views, setting.width, setting.batch)] = result["peak"]
        return result

    monkeypatch.setattr(memory_report, "predict", recorded)
    setting = _setting("--views", "4", "--batch", "1", "--image-width", "84")
    # 1.1 GiB: about 0.09 GiB usable, B = 2 (small batches keep the predictions quick)
    found = memory.largest(setting, "batch", capacities=(1.1,))[1.1]
    assert found >= 2  # the search moved past its first value
    assert {key[:2] for key in peaks} == {(4, 84)}
    assert memory.fits(peaks[(4, 84, found)], 1.1) and not memory.fits(peaks[(4, 84, found + 1)], 1.1)


def test_encodings_comparison_table_and_json(tmp_path, capsys):
    """--encodings: one prediction per encoding (rope first), ratios to rope in the table and JSON."""
    out_json = tmp_path / "compare.json"
    assert main(["bench", "memory", "--config", "quickstart", "--views", "2", "--batch", "1", "--image-width", "28",
                 "--encodings", "prope", "urope", "--quiet", "--json", str(out_json)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("training-step peak memory per encoding (cuda): B=1 x S=2 views of 28x28 px")
    assert lines[1] == "| global_pe | peak MiB | x rope | activations MiB | x rope |"
    rows = {line.split("|")[1].strip(): line.split("|")[2:6] for line in lines[3:]}
    assert list(rows) == ["rope", "prope", "urope"] and rows["rope"][1].strip() == "1.000"
    data = json.loads(out_json.read_text())["encodings"]
    for pe, cells in rows.items():
        peak = data[pe]["predicted_bytes"]["peak"]
        assert float(cells[1]) == pytest.approx(peak / data["rope"]["predicted_bytes"]["peak"], abs=1e-3)
        assert data[pe]["setting"]["global_pe"] == pe
    with pytest.raises(SystemExit, match="--encodings compares predictions"):
        main(["bench", "memory", "--config", "quickstart", "--encodings", "prope", "--measure"])


def test_overrides_after_encodings_are_overrides_not_encodings(tmp_path):
    """``--encodings`` takes a list, so argparse hands it the ``KEY=VALUE`` words after it; they are
    config overrides and apply to every compared encoding."""
    out_json = tmp_path / "compare.json"
    assert main(["bench", "memory", "--config", "quickstart", "--views", "2", "--batch", "1", "--image-width", "28",
                 "--quiet", "--json", str(out_json), "--encodings", "prope", "model.pe_options.fused_attention=on"]) == 0
    data = json.loads(out_json.read_text())
    assert data["overrides"] == ["model.pe_options.fused_attention=on"]
    assert list(data["encodings"]) == ["rope", "prope"]
    assert data["encodings"]["prope"]["setting"]["global_pe"] == "prope"
    with pytest.raises(SystemExit, match="--encodings needs at least one global_pe preset"):
        main(["bench", "memory", "--config", "quickstart", "--encodings", "model.pe_options.fused_attention=on"])


def test_options_one_compared_encoding_does_not_take_are_one_line_before_any_prediction(capsys):
    """URoPE's ``num_anchors`` given as a config override reaches rope too, and a bad entry anywhere in
    the list: one line naming the option (and for the override, how to give it to one encoding), before
    any prediction, not a traceback from inside one."""
    argv = ["bench", "memory", "--config", "quickstart", "--views", "2", "--batch", "1", "--image-width", "28"]
    with pytest.raises(SystemExit, match=r"unknown option\(s\) \['num_anchors'\].*--encodings urope,num_anchors=2"):
        main([*argv, "--encodings", "urope", "model.pe_options.num_anchors=2"])
    with pytest.raises(SystemExit, match="4 heads cannot be split into 3 anchor groups; use a number of anchors that divides the number of heads$"):
        main([*argv, "--encodings", "prope", "urope,num_anchors=3"])
    with pytest.raises(SystemExit, match="--encodings 'nope,x=1': unknown encoding 'nope'"):
        main([*argv, "--encodings", "prope", "nope,x=1"])
    captured = capsys.readouterr()
    assert "global_pe" not in captured.out and "encoding prope" not in captured.err  # nothing was predicted


def test_each_compared_encoding_takes_its_own_options(tmp_path):
    """``urope,num_anchors=2`` and a pair with options are encodings (not overrides) whose options
    reach only their own prediction; rope, the base of the ratios, gets none."""
    out_json = tmp_path / "compare.json"
    pair = "qk=KRtAdd2d,vo=KRtAdd2d,softmax=blockwise"
    assert main(["bench", "memory", "--config", "quickstart", "--views", "2", "--batch", "1", "--image-width", "28",
                 "--quiet", "--json", str(out_json), "--encodings", "urope,num_anchors=2", pair,
                 "model.pe_options.fused_attention=on"]) == 0
    data = json.loads(out_json.read_text())
    assert data["overrides"] == ["model.pe_options.fused_attention=on"]
    assert list(data["encodings"]) == ["rope", "urope,num_anchors=2", pair]
    assert data["encodings"][pair]["setting"]["global_pe"] == {"qk": "KRtAdd2d", "vo": "KRtAdd2d"}
    options = [e["setting"]["pe_options"] for e in data["encodings"].values()]
    assert options == [{"fused_attention": True}, {"fused_attention": True, "num_anchors": 2},
                       {"fused_attention": True, "softmax": "blockwise"}]


def test_fused_attention_auto_follows_the_target_device():
    """The model runs on fake CPU tensors whatever the target, so ``fused_attention: auto`` is
    resolved for the target: off for a CUDA prediction (the GPU default), on for ``--target cpu``;
    an explicit value is kept, and it changes the predicted peak of a camera encoding."""
    cuda = _setting("model.global_pe=prope", "--checkpointing", "off")
    assert cuda.model_config().pe_options["fused_attention"] is False
    assert _setting("--target", "cpu").model_config().pe_options["fused_attention"] is True
    forced = _setting("model.global_pe=prope", "model.pe_options.fused_attention=on", "--checkpointing", "off")
    assert forced.model_config().pe_options["fused_attention"] is True
    assert memory.predict(forced)["peak"] < memory.predict(cuda)["peak"]


class _FakeSetting:
    """Just the sizes ``largest`` reads and changes."""

    def __init__(self, views: int, batch: int):
        self.views, self.batch = views, batch

    def with_sizes(self, views: int, batch: int) -> "_FakeSetting":
        return _FakeSetting(views, batch)


def test_the_fit_search_finds_the_exact_largest_value_when_the_growth_is_not_linear(monkeypatch):
    """``largest`` guesses from a line through two predictions and then confirms: with a peak that
    grows faster than linearly (so the guess overshoots) and one that grows slower (it undershoots)
    the answer is still the largest value that fits, and 0 when even the smallest does not."""
    from depthpe.bench import memory_report
    from depthpe.bench.memory_step import GIB

    def answers(peak_gib, field):
        def predict(setting):
            n = setting.batch if field == "batch" else setting.views
            peak = int(peak_gib(n) * GIB)
            return {"peak": peak, "phase_peaks": {"forward": peak, "backward": peak}}

        monkeypatch.setattr(memory_report, "predict", predict)
        found = memory_report.largest(_FakeSetting(views=4, batch=1), field, capacities=(3.0, 8.0, 1.05))
        brute = {cap: max([n for n in range(1 if field == "batch" else 2, 200)
                           if memory_report.fits(int(peak_gib(n) * GIB), cap)], default=0)
                 for cap in (3.0, 8.0, 1.05)}
        return found, brute

    for peak_gib in (lambda n: 0.5 + 0.1 * n * n / 4, lambda n: 0.3 + 0.8 * n ** 0.5):  # faster, slower than linear
        for field in ("batch", "views"):
            found, brute = answers(peak_gib, field)
            assert found == brute, (field, found, brute)
    found, _ = answers(lambda n: 2.0 + n, "batch")
    assert found[1.05] == 0 and found[8.0] == 4  # nothing fits 1.05 GB; 8 GB: (8 - 1) / 1.1 = 6.36 GiB = 2 + B -> B = 4


@pytest.mark.parametrize("command", [["memory", "--config", "quickstart"], ["attention", "--views", "2"],
                                       ["train", "--config", "quickstart"]])
def test_a_json_path_that_cannot_be_a_file_is_refused_before_the_benchmark_runs(command, tmp_path, capsys):
    """A long benchmark must not end in a traceback at its last line: --json naming a folder, or a
    path below a file, is one error line, status 2, before anything is measured."""
    (tmp_path / "a_file").write_text("x")
    for path, message in ((tmp_path, f"--json {tmp_path} is a folder, not a file (give a file path, e.g. "
                                     f"{tmp_path / 'results.json'})"),
                          (tmp_path / "a_file" / "r.json", f"--json {tmp_path / 'a_file' / 'r.json'}: its folder "
                                                           f"{tmp_path / 'a_file'} is a file, not a folder")):
        assert main(["bench", *command, "--json", str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.err.startswith(f"error: {message}") and captured.err.count("\n") == 1, captured.err
        assert captured.out == ""  # nothing measured
