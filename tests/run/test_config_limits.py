"""Limits of the run config that only a value check can enforce: ``optim.min_lr`` may not exceed
``optim.lr`` and ``train.smoothing`` must lie in [0, 1). Each is refused with one line naming the
key when the config is read (the values at the limits are accepted), and `depthpe train` prints
exactly the line that docs/configuration.md's bad-config table shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.run import RunConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.parametrize("optim", [{"lr": 1e-4, "min_lr": 2e-4}, {"lr": 1e-4, "min_lr": -1e-6}])
def test_min_lr_above_lr_or_negative_is_refused(optim):
    with pytest.raises(ConfigError, match=r"optim.*min_lr.*lr") as err:
        RunConfig.from_dict({"optim": optim})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("optim", [{"lr": 1e-4, "min_lr": 1e-4}, {"lr": 1e-4, "min_lr": 0.0}])
def test_min_lr_up_to_lr_is_accepted(optim):
    cfg = RunConfig.from_dict({"optim": optim})
    assert (cfg.optim.lr, cfg.optim.min_lr) == (optim["lr"], optim["min_lr"])


@pytest.mark.parametrize("smoothing", [1.0, 1.5, -0.1])
def test_smoothing_outside_0_1_is_refused(smoothing):
    with pytest.raises(ConfigError, match=r"train\.smoothing") as err:
        RunConfig.from_dict({"train": {"smoothing": smoothing}})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("smoothing", [0.0, 0.999])
def test_smoothing_in_0_1_is_accepted(smoothing):
    assert RunConfig.from_dict({"train": {"smoothing": smoothing}}).train.smoothing == smoothing


def _documented_error(arguments: str) -> str:
    """The error line of the bad-config table row whose arguments cell is exactly ``arguments``."""
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and cells[1] == f"`{arguments}`":
            return cells[2].removeprefix("`` ").removesuffix(" ``")
    raise AssertionError(f"docs/configuration.md has no bad-config row for {arguments}")


@pytest.mark.parametrize("override", ["optim.lr=1e-7", "train.smoothing=1"])
def test_train_prints_the_documented_line(override, capsys):
    """`depthpe train --config quickstart OVERRIDE` (the docs' setting) stops with status 2 and the
    table's line; --print-config reads the config only, so nothing is built either way."""
    assert main(["train", "--config", "quickstart", override, "--print-config"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == _documented_error(override)
