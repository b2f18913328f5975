"""``depthpe rmvd`` owns its --out through depthpe.files.output_folder (issue 42): S3 (other data is another
fingerprint), S4 (--predictions does not replace a --model run's outputs), S8 (a fresh or restarted
--model run deletes only the maps it wrote), S9 (eval into an rmvd folder is refused)."""

import hashlib
import shutil

import numpy as np

from depthpe.cli import main
from depthpe.testing.rmvd_samples import write_predictions, write_sample_list
from tests.helpers.rmvd import run_rmvd


def _hash(folder):
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return digest.hexdigest()


def test_other_data_under_another_data_root_is_not_resumed(tmp_path, capsys, rmvd_micro_model):
    lists = write_sample_list(tmp_path / "a", num_samples=2, images=True)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    np.save(tmp_path / "b" / "toy_gt" / "toy_000.npy", np.full((8, 12), 7.0, np.float32))  # other GT
    argv = ["--samples", lists, "--model", rmvd_micro_model, "--out", tmp_path / "out"]
    assert run_rmvd(capsys, *argv)[0] == 0
    before = _hash(tmp_path / "out")
    status, stdout, err = run_rmvd(capsys, *argv, "--data-root", f"toy={tmp_path / 'b'}")
    assert status == 2 and "resuming" not in stdout and err.count("\n") == 1
    assert ("the data the sample lists name (--data-root, or an image or GT file's path, size or modification "
            "time) changed") in err and "--restart" in err
    assert _hash(tmp_path / "out") == before


def test_scoring_predictions_does_not_replace_a_model_runs_outputs(tmp_path, capsys, rmvd_micro_model, synth_root):
    lists = write_sample_list(tmp_path / "lists", num_samples=2, images=True)
    out = tmp_path / "out"
    assert run_rmvd(capsys, "--samples", lists, "--model", rmvd_micro_model, "--out", out)[0] == 0
    write_predictions(tmp_path / "pred", lists, 1.5)
    before = _hash(out)
    status, _, err = run_rmvd(capsys, "--samples", lists, "--predictions", tmp_path / "pred", "--out", out)
    assert status == 2 and "holds the outputs of depthpe rmvd --model, not of depthpe rmvd" in err
    assert _hash(out) == before
    # S9: nor does an evaluation or the correspondence benchmark write into it
    for argv in (["eval", "--model", str(rmvd_micro_model), "--data", str(synth_root), "--out", str(out), "--cpu"],
                 ["study", "correspondence", "--data", str(synth_root), "--out", str(out)]):
        assert main(argv) == 2 and "holds the outputs of depthpe rmvd --model" in capsys.readouterr().err
    assert _hash(out) == before


def test_a_model_run_deletes_only_the_maps_it_wrote(tmp_path, capsys, rmvd_micro_model):
    lists = write_sample_list(tmp_path / "lists", num_samples=2, images=True)
    out = tmp_path / "out"
    write_predictions(out / "predictions", lists, 1.0)  # a user's own maps where --model writes
    mine = sorted(p.relative_to(out) for p in (out / "predictions").rglob("*.npy"))
    argv = ["--samples", lists, "--model", rmvd_micro_model, "--out", out]
    status, _, err = run_rmvd(capsys, *argv)
    assert status == 2 and "no depthpe command recorded" in err and "predictions/toy/toy_000.npy" in err
    assert sorted(p.relative_to(out) for p in (out / "predictions").rglob("*.npy")) == mine
    (out / "predictions" / "toy" / "keep.npy").write_bytes(b"user")
    assert run_rmvd(capsys, *argv, "--restart")[0] == 0  # adopts the folder; writes its own maps over the names
    assert run_rmvd(capsys, *argv, "--restart", "--setting", "single_view")[0] == 0  # deletes its own maps only
    assert (out / "predictions" / "toy" / "keep.npy").read_bytes() == b"user"
