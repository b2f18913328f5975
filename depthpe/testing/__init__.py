"""Test and benchmark fixtures shipped with the package.

``fake_datasets`` writes small fake copies of the real dataset layouts (CO3D, WildRGB-D,
ARKitScenes, MegaSynth) from procedural scenes with known cameras, for the converter tests and
``depthpe bench convert``; ``captures`` and ``transforms_captures`` write a scene as a user's
capture (images + depth + cameras JSON, COLMAP, nerfstudio ``transforms.json``) or as a WAI scene
(``write_wai_scene``); ``rmvd_samples`` writes tiny RMVD sample lists and predictions for
``depthpe rmvd``. Nothing here is used by training or evaluation.
"""
