"""Tests of depthpe.data.format: the scene file format, its index and `depthpe check`."""
