"""Tests of depthpe.loader: datasets, samples, sampling, augmentation, batching and loader workers."""
