"""Depth for a user's own images: ``depthpe.predict`` (``api``), what it returns (``result``) and the
files ``depthpe predict`` writes (``files``)."""
