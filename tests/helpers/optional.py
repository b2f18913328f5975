"""Optional dependencies that some tests need: imported or the test module skipped, with the reason."""

import pytest


def import_pycolmap():
    """pycolmap, or skip the caller (the test module when called at import, else the test): it is an
    optional extra that the dev extra installs, so CI runs these tests; they skip only in a checkout
    installed without it."""
    return pytest.importorskip("pycolmap", reason="pycolmap (an optional extra that the dev extra installs, so CI "
                               "runs these tests; skipped only in a checkout installed without it: "
                               "pip install -e '.[dev]')")
