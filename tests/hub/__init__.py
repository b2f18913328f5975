"""Tests of depthpe.hub: pushes to a (fake, loopback) Hub."""
