"""Tests of depthpe.run: training runs in one process (config, loop, checkpoints, resume)."""
