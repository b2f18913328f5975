"""The geometry-only study: how well the cameras alone predict the depth scale (``cameras_only``) and the correspondence lift per layer across a study's runs (``lift_table``)."""
