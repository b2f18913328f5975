"""The benchmarks that write a folder own it through depthpe.files.output_folder (issue 42): a rerun of
``depthpe study camera-noise`` with other levels is refused before sweep.json changes (S7), a second
``depthpe study correspondence`` with other settings does not replace results.json (S6)."""

import hashlib

from depthpe.studies.camera_noise.runner import CameraNoiseSweepConfig
from depthpe.studies.correspondence.config import CorrespondenceConfig
from depthpe.cli import main
from depthpe.files.output_folder import owned_output_folder, settings_fingerprint


def _hash(folder):
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return digest.hexdigest()


def test_a_sweep_rerun_with_other_levels_is_refused_before_its_plan_changes(tmp_path, saved_model, synth_root, capsys):
    out = tmp_path / "sweep"
    first = CameraNoiseSweepConfig(model=[str(saved_model)], data=str(synth_root), out=str(out),
                                   rotation_levels=[0.0, 90.0], translation_levels=[0.0])
    with owned_output_folder(out, "depthpe study camera-noise", settings_fingerprint(first)):  # the first sweep
        (out / "sweep.json").write_text('{"levels": [0, 90]}')
    before = _hash(out)
    argv = ["study", "camera-noise", str(saved_model), "--data", str(synth_root), "--out", str(out),
            "--rotation-levels", "0", "10", "--translation-levels", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds the outputs of depthpe study camera-noise made with other settings: rotation_levels was [0.0, 90.0], " \
           "now [0.0, 10.0]" in err and "--overwrite" in err
    assert _hash(out) == before  # sweep.json still says 90 deg


def test_a_second_correspondence_run_with_other_settings_does_not_replace_its_results(tmp_path, synth_root, capsys):
    out = tmp_path / "bench"
    first = CorrespondenceConfig(data=str(synth_root), out=str(out), steps=3)
    with owned_output_folder(out, "depthpe study correspondence", settings_fingerprint(first, leave_out=("threads",))):
        (out / "results.json").write_text("{}")
    before = _hash(out)
    assert main(["study", "correspondence", "--data", str(synth_root), "--out", str(out), "--steps", "5"]) == 2
    assert "made with other settings: steps was 3, now 5" in capsys.readouterr().err
    assert _hash(out) == before

