"""The Robust Multi-View Depth benchmark (RMVD; Schröppel et al., 3DV 2022): sample lists
(``samples.py``), the metrics and alignments (``metrics.py``), source-view orderings
(``orderings.py``), scoring a folder of predicted depth maps (``harness.py``), the settings of
``depthpe rmvd`` (``config.py``), the readers of the five test sets in their native layouts
(``datasets/``) and the shipped official sample lists (``lists/``, ``official.py``). See docs/rmvd.md."""
