"""Tests of depthpe.pe: the camera positional encodings."""
