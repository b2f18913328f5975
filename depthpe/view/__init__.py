"""``depthpe view``: a local 3D viewer (in the browser) of predictions and evaluation scenes.

* ``config``: the command's settings (light: no torch, no viser);
* ``scene``: what is shown (``ViewScene``: frames with images, cameras, predicted and GT depth) and
  the pure functions that turn it into coloured points under a selection (``select_points``);
* ``loaders``: a ``ViewScene`` from a ``depthpe predict`` folder, or from a model and a held-out scene;
* ``app``: the viser server and its controls (the only module importing viser, the ``view`` extra).
"""
