"""Reading the markdown tables the commands print."""


def table_rows(out: str, first_cells: tuple[str, ...]) -> dict[str, list[float]]:
    """Rows of a printed markdown table whose first cell is in ``first_cells``: {first cell: numbers}."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] in first_cells:
            rows[cells[0]] = [float(c) for c in cells[1:]]
    return rows
