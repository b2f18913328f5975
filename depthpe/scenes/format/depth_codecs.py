"""Names of the HDF5 codecs a scene file's depth can be stored with (``write_scene(depth_compression=...)``).

A module of its own, without h5py or OpenCV, so that command-line parsers can offer the choices
cheaply; ``scene_file`` maps each name to its HDF5 filter.
"""

from __future__ import annotations

__all__ = ["DEPTH_COMPRESSIONS", "DEFAULT_DEPTH_COMPRESSION"]

# "gzip": level 4 + byte shuffle (the layout of files written before the choice existed; smallest);
# "lzf": h5py's built-in fast codec + shuffle; "none": uncompressed (fastest to read, largest).
DEPTH_COMPRESSIONS = ("gzip", "lzf", "none")
DEFAULT_DEPTH_COMPRESSION = "gzip"
