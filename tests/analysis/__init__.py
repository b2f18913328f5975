"""Tests of depthpe.analysis: `depthpe compare`, `depthpe plot` and study tables."""
