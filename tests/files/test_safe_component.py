"""``safe_component``: any string from data becomes one file-name component inside the folder it is
joined to, ordinary names stay as they are, and different names stay different."""

import os

import pytest

from depthpe.files import MAX_COMPONENT_CHARS, safe_component

HOSTILE = ["x/../../../../tmp/victim", "..", ".", "", "/etc/passwd", "a\\..\\b", ".hidden", "a\x00b", "é/ü",
           "con:stream", "a" * 500, "line\nbreak", "~root", "$(rm -rf)", "a b"]


@pytest.mark.parametrize("name", ["scene_0001", "co3d", "apple-123.jpg", "frame_00000.png", "a+b=c@d,e"])
def test_ordinary_names_are_kept(name):
    assert safe_component(name) == name


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_become_one_plain_component(tmp_path, name):
    out = safe_component(name)
    assert out and os.sep not in out and "/" not in out and "\\" not in out and "\x00" not in out
    assert not out.startswith(".") and len(out) <= MAX_COMPONENT_CHARS
    assert (tmp_path / out).resolve().parent == tmp_path.resolve()
    assert safe_component(out) == out  # already safe: a second pass changes nothing


def test_different_names_never_share_a_component():
    names = HOSTILE + ["x_.._.._.._.._tmp_victim", "a/b", "a_b", "a\\b", "a" * 501]
    outs = [safe_component(n) for n in names]
    assert len(set(outs)) == len(names)
