"""The camera-noise study: every model at every input-camera noise level, with paired intervals and a metric-vs-noise figure (docs/evaluation.md)."""
