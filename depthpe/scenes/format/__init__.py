"""The scene file format and what guards it: the HDF5 scene file and ``index.json``
(``scene_file``), its limits and value rules (``limits``), strict JPEG/PNG decoding
(``image_bytes``), the depth codecs (``depth_codecs``), checking scene files (``check``) and
rebuilding ``index.json`` (``reindex``)."""
