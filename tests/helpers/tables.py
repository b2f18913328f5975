"""Reading the markdown tables the commands print."""


def table_rows(out: str, first_cells: tuple[str, ...]) -> dict[str, list[float]]:
    """Rows of a printed markdown table whose first cell is in ``first_cells``: {first cell: numbers}."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] in first_cells:
            rows[cells[0]] = [float(c) for c in cells[1:]]
    return rows


def nested_close(a, b, tol=1e-6) -> bool:
    """Nested dicts of numbers equal within ``tol`` (relative above 1), NaN equal to NaN: summaries made
    by different process layouts, whose float sums run in another order."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(nested_close(a[k], b[k], tol) for k in a)
    if isinstance(a, float):
        return abs(a - b) <= tol * max(1.0, abs(b)) or (a != a and b != b)
    return a == b
