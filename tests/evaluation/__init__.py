"""Tests of depthpe.evaluation: `depthpe eval`."""
