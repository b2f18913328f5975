"""Weight files are read without executing code: a .pt file whose pickle runs a command when
loaded is refused with a clear error, and the command never runs."""

import os

import pytest
import torch


class _RunsCode:
    """Unpickling this calls os.mkdir(marker): what a hostile checkpoint would do."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


@pytest.fixture
def hostile_pt(tmp_path):
    marker = tmp_path / "code_ran"
    path = tmp_path / "weights.pt"
    torch.save({"model": {"w": torch.zeros(1)}, "payload": _RunsCode(str(marker))}, path)
    return path, marker


def test_backbone_weights_pickle_is_not_executed(hostile_pt):
    from depthpe.model.backbone import BackboneWeightsError, read_state_dict

    path, marker = hostile_pt
    with pytest.raises(BackboneWeightsError, match="could not read weights file"):
        read_state_dict(path)
    assert not marker.exists()


def test_vggt_checkpoint_pickle_is_not_executed(hostile_pt):
    from depthpe.model.vggt_weights import read_vggt_state_dict

    path, marker = hostile_pt
    with pytest.raises(Exception, match="(?i)weights|unpickl|pickle"):
        read_vggt_state_dict(path)
    assert not marker.exists()
