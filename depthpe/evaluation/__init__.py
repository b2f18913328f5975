"""Evaluation on held-out scenes: the protocol's choices (``protocol``: sources, scene selection,
manifests), the held-out set resolved once from them and the model's input size (``heldout``), one
scene's outcome (``record``), the loop (``loop``), its output files (``outputs``), what ``depthpe
eval`` runs (``command``), the partial results that let an interrupted run resume (``partial``), the
worst images kept while it runs (``worst``) and one held-out scene predicted as the evaluation does
(``scene``)."""
