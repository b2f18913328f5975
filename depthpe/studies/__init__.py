"""Studies: experiments that ask a question of the encodings, each in its own folder with its
settings, its runner, its tables and figures and the shell script that runs it end to end.

- ``correspondence``: does the global attention find the true cross-view match? (``depthpe study
  correspondence``; docs/correspondence.md)
- ``camera_noise``: how does depth degrade when the input cameras are wrong? (``depthpe study
  camera-noise``)
- ``geometry``: the geometry-only scenes: how much of the depth scale the cameras alone explain
  (``depthpe study cameras-only``) and the lift table of the geometry study (``depthpe study lift-table``)
- ``mini``: the CPU mini-study of every preset encoding (a shell script)

Benchmarks of speed, memory and scale stay in ``depthpe.bench``. Results: docs/results.md."""
