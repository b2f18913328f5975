"""Correspondence diagnostics of the global attention (``depthpe probe attention``, docs/probe.md).

How much attention mass a query patch puts on the key patches around the true reprojection of its
3D point in another view, against uniform attention (the *correspondence lift*), per global layer
and head. The true matches come from GT depth and cameras (``depthpe.geometry``). Modules: capturing the
attention weights without changing the forward (``capture``), the lift sums and tables (``lift``),
the run over held-out scenes (``runner``), the output files (``report``) and the command's typed
settings (``config``, no torch). Nothing is imported here, so ``depthpe.probe.config`` stays light.
"""
