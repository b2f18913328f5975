"""Tests of depthpe.view: `depthpe view`."""
