"""Tests of depthpe.config: typed command options."""
