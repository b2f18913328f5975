"""Evaluation on held-out scenes: the loop (``loop``), the partial results that let an interrupted
run resume (``partial``), the worst images kept while it runs (``worst``) and one held-out scene
predicted as the evaluation does (``scene``)."""
