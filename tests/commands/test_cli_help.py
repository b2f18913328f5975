"""`depthpe --help` names every layout `depthpe convert` reads, and the camera files of a capture
(a new user looks there first)."""

from __future__ import annotations

from depthpe.cli import main
from depthpe.scenes.convert.registry import CONVERTERS


def test_top_level_help_lists_every_convert_format(capsys):
    try:
        main(["--help"])
    except SystemExit:
        pass
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    missing = [name for name in (*CONVERTERS, "transforms.json", "cameras.json") if name not in text]
    assert not missing, f"depthpe --help does not name {missing}:\n{text}"
