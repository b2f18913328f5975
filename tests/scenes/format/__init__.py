"""Tests of depthpe.scenes.format: the scene file format, its index and `depthpe check`."""
