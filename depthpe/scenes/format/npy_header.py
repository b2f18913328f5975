"""What a ``.npy`` array (a file, or a member of an ``.npz``) claims to hold, read from its header
alone, so that a small file claiming a huge array is refused before anything is allocated
(``np.load`` would allocate what the header says: a 100000x100000 float32 header is 37 GB).

Used by the converters' depth reader (``convert/folder.py``) and RMVD's depth readers
(``depthpe.rmvd.harness``, the Tanks and Temples ``.npz``). numpy and the standard library only.
"""

from __future__ import annotations

import math
from typing import BinaryIO

from numpy.lib import format as npy_format

from .limits import MAX_FRAME_SIDE

__all__ = ["npy_claim_problem"]


def npy_claim_problem(f: BinaryIO, available: int, max_side: int = MAX_FRAME_SIDE) -> tuple[str, str] | None:
    """Read the header of the ``.npy`` stream ``f`` (at its start) whose data may be ``available``
    bytes long in all (the file's size, or an ``.npz`` member's); (kind, one line) when it cannot be a
    depth map, else None. kind: ``unreadable`` (no ``.npy`` header, Python objects), ``too large``
    (a side above ``max_side``), ``truncated`` (the header claims more bytes than there are)."""
    try:
        version = npy_format.read_magic(f)
        read_header = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
        shape, _, dtype = read_header(f)
        offset = f.tell()
    except (OSError, ValueError, EOFError) as err:
        return "unreadable", f"not a readable .npy array ({err})"
    if dtype.hasobject:
        return "unreadable", "holds Python objects, not numbers"
    if any(side > max_side for side in shape):
        return "too large", (f"claims an array of shape {tuple(shape)}: more than {max_side} pixels on a side "
                             "(corrupt or hostile file?)")
    claimed = offset + math.prod(shape) * dtype.itemsize
    if claimed > available:
        return "truncated", f"claims {claimed} bytes but holds {available} (truncated or corrupt)"
    return None
