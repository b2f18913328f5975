"""Without a cluster the Slurm tests fail and say why (never a silent skip): ``ensure_cluster`` starts
it when it does not answer, and fails with the words of ``local_cluster.sh start`` when that fails."""

from __future__ import annotations

import pytest

import tests.helpers.slurm as slurm_helpers


def test_a_cluster_that_cannot_start_fails_the_tests_with_the_reason(tmp_path, monkeypatch):
    fake = tmp_path / "local_cluster.sh"  # a machine without Slurm and without root
    fake.write_text("#!/bin/sh\n[ \"$1\" = start ] && echo 'local_cluster: Slurm is not installed and installing "
                    "it needs root' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(slurm_helpers, "CLUSTER", fake)
    with pytest.raises(pytest.fail.Exception, match=r"(?s)start` failed .*installing it needs root"):
        slurm_helpers.ensure_cluster()
