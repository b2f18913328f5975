"""Scene files and everything that writes or checks them: the HDF5 scene format and its guards
(``format/``), the synthetic scenes (``synth/``), the dataset converters (``convert/``), the readers of
users' camera files (``cameras``, ``transforms_json``: COLMAP, cameras JSON, nerfstudio / instant-ngp,
WAI) and the process pool these offline tools spread their items over (``parallel``, ``threads``).

The loader (``depthpe.loader``) reads scene files only through ``depthpe.scenes.api``; nothing here
imports the loader. See docs/scene-format.md and docs/data.md."""
