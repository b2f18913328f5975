"""Tests of depthpe.probe: attention probes."""
