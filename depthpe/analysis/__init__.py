"""Reading finished evaluations and runs side by side: ``depthpe compare`` (``compare``) and the
validation curves of ``depthpe plot`` (``plotting``)."""
