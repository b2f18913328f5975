"""Tests of depthpe.scenes.convert: `depthpe convert` for each source dataset."""
