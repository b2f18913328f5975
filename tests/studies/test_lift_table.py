"""depthpe study lift-table (depthpe/studies/geometry/lift_table.py): the per-group lift table of a study, from hand-written probe summaries."""

import json
from pathlib import Path

from depthpe.studies.geometry import lift_table


def write_probe(run: Path, lifts: dict[tuple[int, int], tuple[float, float]]) -> None:
    """run/probe_geo/summary.json with layer rows {(layer, radius): (lift, same_position_lift)}."""
    rows = [{"layer": layer, "radius": radius, "lift": lift, "same_position_lift": same}
            for (layer, radius), (lift, same) in lifts.items()]
    (run / "probe_geo").mkdir(parents=True)
    (run / "probe_geo" / "summary.json").write_text(json.dumps({"meta": {}, "datasets": {"synth": {"layers": rows}}}))


def test_groups_by_name_without_seed_and_averages_over_seeds(tmp_path):
    write_probe(tmp_path / "urope_anchors-1_s0", {(0, 1): (2.0, 1.0), (0, 0): (9.0, 9.0)})
    write_probe(tmp_path / "urope_anchors-1_s1", {(0, 1): (4.0, 1.0), (0, 0): (9.0, 9.0)})
    write_probe(tmp_path / "rope_s0", {(0, 1): (1.5, 1.25)})
    table = lift_table.lift_tables(tmp_path, "probe_geo", radius=1)
    lines = table.splitlines()
    assert lines[0] == "### synth, r = 1"
    # mean 3, sample std sqrt(2) = 1.41; margins 1 and 3: mean 2, std 1.41
    assert "| urope_anchors-1 | 0 | 2 | 3.00 ± 1.41 | 2.00 ± 1.41 |" in lines
    assert "| rope | 0 | 1 | 1.50 ± - | 0.25 ± - |" in lines
    assert not any("9.00" in line for line in lines)  # the r = 0 rows are not mixed in


def test_depthpe_study_lift_table_prints_the_table(tmp_path, capsys):
    from depthpe.cli import main

    write_probe(tmp_path / "rope_s0", {(0, 1): (1.5, 1.25)})
    assert main(["study", "lift-table", str(tmp_path), "--radius", "1"]) == 0
    out = capsys.readouterr().out
    assert "rope" in out and "1.5" in out
