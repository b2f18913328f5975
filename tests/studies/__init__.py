"""Tests of depthpe.studies: the correspondence, camera-noise and geometry studies."""
