"""What the HTML reports share: the Jinja2 environment (autoescaped templates in templates/),
PNGs embedded as data URIs, number formatting, and the atomic write of a page."""

from __future__ import annotations

import base64
import math
from pathlib import Path

from ..files import atomic_write_bytes

__all__ = ["png_data_uri", "number", "render", "write_page"]

TEMPLATES = Path(__file__).resolve().parent / "templates"


def png_data_uri(png: str | Path | bytes) -> str:
    """``data:image/png;base64,...`` of a PNG file or its bytes (the page then needs no other file)."""
    data = png if isinstance(png, bytes) else Path(png).read_bytes()
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def number(value, digits: int = 4) -> str:
    """A table cell: floats with ``digits`` decimals, NaN/None as '-', the rest as text."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def render(template: str, **context) -> str:
    """The page of ``templates/<template>`` with ``context`` (HTML-escaped; ``number`` and
    ``png_data_uri`` available as filters)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["number"] = number
    env.filters["data_uri"] = png_data_uri
    return env.get_template(template).render(**context)


def write_page(path: str | Path, html: str) -> Path:
    """Write ``html`` to ``path`` atomically (UTF-8); returns the path."""
    return atomic_write_bytes(Path(path), html.encode("utf-8"))
