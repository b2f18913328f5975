"""Readers of the RMVD test sets in their publishers' native layouts, as the reference code
(``lmb-freiburg/robustmvd``) reads them: one module per dataset (``kitti``, ``scannet``, ``eth3d``,
``dtu``, ``tanks_and_temples``), each with ``read_depth(path, key_image)`` -> the keyview's GT depth
(H, W) float64 metres, 0 = no ground truth. What they share is in ``common``; ``readers`` maps a
sample list's ``"format"`` to its reader and ``images`` reads a view's image at the size its ``K``
is given for. Layouts and how to get each dataset: docs/rmvd.md.

``DEPTH_FORMATS`` are the values of a sample list's ``"format"``: ``npy`` (the default: ``depth``
is a float ``.npy`` in metres) and the five native encodings. This package ``__init__`` imports
nothing, so the sample-list loader can check a format without loading the readers.
"""

DEPTH_FORMATS = ("npy", "kitti", "scannet", "eth3d", "dtu", "tanks_and_temples")
