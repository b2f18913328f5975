"""Tests of depthpe.data: synthetic data, datasets, sampling, augmentation and loader workers."""
