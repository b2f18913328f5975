"""The loader that training and evaluation read scene files through: the data config (``config``),
step-indexed sampling and view selection (``sampling``), the scenes an ``index.json`` lists
(``scenes``), one sample read, augmented and normalized (``samples``, ``augment``), the datasets
(``datasets``), collation (``batching``), the training loader (``loaders``) and its workers
(``workers``). It reads the scene format only through ``depthpe.scenes.api``."""
