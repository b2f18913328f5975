"""Tests of depthpe.scenes: the scene format, synthetic scenes, converters, camera readers and the process pool."""
