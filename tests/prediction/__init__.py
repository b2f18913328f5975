"""Tests of depthpe.prediction: `depthpe predict` and its files."""
