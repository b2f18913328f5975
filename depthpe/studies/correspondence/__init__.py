"""The correspondence study: train the global attention on true cross-view matches per encoding and score top-1 / within-1 per layer (docs/correspondence.md)."""
