"""Tests of depthpe.report: HTML reports and figures."""
