"""Tests of depthpe.data.convert: `depthpe convert` for each source dataset."""
