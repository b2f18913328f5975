"""Every writing command goes through the one output-folder owner (depthpe/files/output_folder.py): each
writer refuses a folder that holds another writer's outputs, and refuses its own folder while
another process of it holds the lock; either way nothing in the folder changes (issue 42, S4, S6, S9).

The folders of the other writers are made with the owner itself (a manifest naming the writer's
command and a file it wrote), so each refusal is checked at the point before any work starts."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from depthpe.cli import main
from depthpe.files.output_folder import claim_output_folder
from depthpe.testing.rmvd_samples import write_sample_list


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, synth_root, saved_model, rmvd_micro_model):
    """What the writers read: the synthetic data, the micro models, an RMVD sample list with images."""
    lists = write_sample_list(tmp_path_factory.mktemp("lists"), num_samples=1, num_views=2, images=True)
    return {"data": str(synth_root), "model": str(saved_model), "rmvd_model": str(rmvd_micro_model),
            "lists": str(lists)}


# writer: (the command its manifest names, where it writes given --out BASE, its command line into BASE)
WRITERS = {
    "eval": ("depthpe eval", "", lambda i, b: ["eval", "--model", i["model"], "--data", i["data"], "--out", b, "--cpu"]),
    "rmvd-model": ("depthpe rmvd --model", "", lambda i, b: ["rmvd", "--samples", i["lists"], "--model",
                                                           i["rmvd_model"], "--out", b, "--device", "cpu"]),
    "rmvd-predictions": ("depthpe rmvd", "", lambda i, b: ["rmvd", "--samples", i["lists"], "--predictions",
                                                         i["data"], "--out", b]),
    "predict": ("depthpe predict", "", lambda i, b: ["predict", "--model", i["model"], "--images", i["data"],
                                                   "--out", b, "--device", "cpu"]),
    "probe": ("depthpe probe attention", "", lambda i, b: ["probe", "attention", "--model", i["model"], "--data",
                                                          i["data"], "--out", b, "--cpu"]),
    "convert": ("depthpe convert", "co3d", lambda i, b: ["convert", "co3d", "--src", i["data"], "--out", b]),
    "synth": ("depthpe synth", "synth", lambda i, b: ["synth", "--out", b, "--train-scenes", "1", "--val-scenes", "0",
                                                     "--height", "28", "--width", "28", "--quiet"]),
    "compare": ("depthpe compare", "", lambda i, b: ["compare", i["data"], "--out", b]),
    "plot": ("depthpe plot", "", lambda i, b: ["plot", i["data"], "--out", b]),
    "study-correspondence": ("depthpe study correspondence", "",
                             lambda i, b: ["study", "correspondence", "--data", i["data"], "--out", b, "--steps", "1"]),
    "study-camera-noise": ("depthpe study camera-noise", "",
                           lambda i, b: ["study", "camera-noise", i["model"], "--data", i["data"], "--out", b]),
    "bench-data-scale": ("depthpe bench data-scale", "", lambda i, b: ["bench", "data-scale", "--out", b,
                                                                       "--scenes", "1"]),
    "bench-gpu-check": ("depthpe bench gpu-check", "", lambda i, b: ["bench", "gpu-check", "--out", b, "--tiny",
                                                                     "--device", "cpu"]),
    "bench-rehearsal": ("depthpe bench rehearsal", "", lambda i, b: ["bench", "rehearsal", "--config", "quickstart", "--out", b]),
}


def folder_hash(folder: Path) -> str:
    """SHA-256 of every file's relative path and bytes under ``folder``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def make_outputs(folder: Path, command: str) -> None:
    """A folder that ``command`` wrote (through the owner): its manifest and one output file."""
    with claim_output_folder(folder, command) as owned:
        owned.begin({"made_by": command})
        (folder / "result.txt").write_text(command)


def refused(argv: list[str], capsys) -> str:
    """Run ``depthpe ARGV``; assert exit status 2 and one error line; return it."""
    status = main(argv)
    captured = capsys.readouterr()
    lines = [line for line in (captured.err + captured.out).splitlines() if "error" in line]
    assert status == 2 and len(lines) == 1, (argv, status, captured.out[-500:], captured.err[-500:])
    return lines[0]


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_writer_refuses_every_other_writers_folder_and_changes_nothing(writer, inputs, tmp_path, capsys):
    command, sub, argv = WRITERS[writer]
    for other, (other_command, _sub, _argv) in sorted(WRITERS.items()):
        if other_command == command:
            continue
        base = tmp_path / other
        target = base / sub if sub else base
        make_outputs(target, other_command)
        before = folder_hash(base)
        line = refused(argv(inputs, str(base)), capsys)
        assert f"holds the outputs of {other_command}, not of {command}" in line, (writer, other, line)
        assert folder_hash(base) == before, (writer, other)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_second_run_of_a_writer_is_refused_while_the_first_holds_the_folder(writer, inputs, tmp_path, capsys):
    command, sub, argv = WRITERS[writer]
    target = tmp_path / sub if sub else tmp_path
    with claim_output_folder(target, command) as first:  # the first run, still writing
        first.begin({"made_by": "the first run"})
        (target / "result.txt").write_text("half written")
        before = folder_hash(tmp_path)
        line = refused(argv(inputs, str(tmp_path)), capsys)
        assert f"is in use by {command} (pid" in line, line
        assert folder_hash(tmp_path) == before


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_folder_of_unrecorded_files_is_refused(writer, inputs, tmp_path, capsys):
    command, sub, argv = WRITERS[writer]
    target = tmp_path / sub if sub else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    (target / "mine.txt").write_text("a file no depthpe command wrote")
    before = folder_hash(tmp_path)
    line = refused(argv(inputs, str(tmp_path)), capsys)
    assert "file(s) that no depthpe command recorded as its outputs (e.g. mine.txt)" in line, line
    assert folder_hash(tmp_path) == before and not (target / ".lock").exists()
