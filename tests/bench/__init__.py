"""Tests of depthpe.bench: `depthpe bench`."""
