"""Tests of depthpe.model: the depth model, its weights and inference path."""
