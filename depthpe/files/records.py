"""Reading the small JSON files a command keeps next to its outputs, with one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path


def read_json(path: str | os.PathLike):
    """The JSON value of ``path``'s UTF-8 text. OSError as raised; ``ValueError`` with one line for
    text that is not UTF-8 or not JSON, and for JSON nested deeper than Python's recursion limit (a
    "nesting bomb" such as 100000 ``[``, on which ``json.loads`` raises ``RecursionError``)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply (more levels of [ or { than any real file has)") from None
    except ValueError as err:
        raise ValueError(str(err).splitlines()[0]) from None


def read_record(path: str | os.PathLike) -> dict | None:
    """A small JSON object that a command keeps next to its outputs (a lock holder, a folder's
    manifest): the dict, None when the file does not exist, {} when it cannot be read or is not an
    object (a record is advisory: its reader decides what an unreadable one means)."""
    try:
        doc = read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
