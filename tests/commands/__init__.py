"""Tests of depthpe.commands: the command line."""
