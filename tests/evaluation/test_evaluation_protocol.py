"""Which held-out scenes an evaluation scores (depthpe.evaluation.protocol.scene_indices) and which
images it keeps for the report (depthpe.evaluation.worst.WorstImages), on stand-in datasets."""

from types import SimpleNamespace

import numpy as np
import pytest

from depthpe.evaluation.protocol import scene_indices
from depthpe.evaluation.worst import WorstImages


def _dataset(scenes_per_source: dict[str, int], max_scenes: dict[str, int] | None = None):
    """The part of a ``SceneEvalDataset`` that ``scene_indices`` reads: items (source, scene) in
    index order, the sources' names and ``max_scenes``, and "<source>/<scene>" keys."""
    max_scenes = max_scenes or {}
    sources = [SimpleNamespace(name=n, max_scenes=max_scenes.get(n)) for n in scenes_per_source]
    items = [(s, j) for s, n in enumerate(scenes_per_source.values()) for j in range(n)]
    return SimpleNamespace(items=items, sources=sources,
                           scene_key=lambda i: f"{sources[items[i][0]].name}/scene_{items[i][1]:02d}")


def test_a_sources_own_limit_overrides_the_evaluations():
    ds = _dataset({"a": 6, "b": 6}, max_scenes={"b": 1})
    assert scene_indices(ds, 3) == [0, 1, 2, 6]  # a: the first 3 of the global limit; b: its own 1
    assert scene_indices(ds, None) == [0, 1, 2, 3, 4, 5, 6]  # no global limit: all of a


@pytest.mark.parametrize("seed", range(5))
def test_a_random_draw_comes_back_in_index_order(seed):
    ds = _dataset({"a": 30, "b": 30})
    chosen = scene_indices(ds, 4, "random", seed)
    assert chosen == sorted(chosen) and len(chosen) == 8 and len(set(chosen)) == 8
    assert sum(i < 30 for i in chosen) == 4  # four from each source


def test_a_fixed_manifest_is_applied_before_the_limit():
    ds = _dataset({"a": 6})
    assert scene_indices(ds, 2, scenes={"a/scene_03", "a/scene_04", "a/scene_05"}) == [3, 4]
    with pytest.raises(ValueError, match="selection must be one of"):
        scene_indices(ds, 2, "best")


def _rows(values, mode="native"):
    return [{"dataset": "d", "scene": "s", "image": i, "mode": mode, "abs_rel": v} for i, v in enumerate(values)]


def test_only_native_rows_enter_and_zero_panels_keep_nothing():
    images, depth = np.zeros((2, 3, 2, 2)), np.ones((2, 2, 2))
    worst = WorstImages(2)
    assert worst.offer(_rows([0.9, 0.8], mode="scene_aligned"), images, depth, depth, depth > 0, [0, 1]) == []
    worst.offer(_rows([0.1, 0.2]), images, depth, depth, depth > 0, [0, 1])
    assert [item["abs_rel"] for item in worst.items] == [0.2, 0.1]
    none = WorstImages(0)  # --panels 0
    assert none.offer(_rows([0.5]), images[:1], depth[:1], depth[:1], depth[:1] > 0, [0]) == [] and none.items == []


def test_a_native_image_that_does_not_enter_does_not_end_the_scene():
    """k = 1: 0.1 does not enter after 0.5, and 0.9 after it still does; the panel masks what ``valid``
    says (not only the pixels without GT)."""
    images, depth = np.zeros((3, 3, 2, 2)), np.ones((3, 2, 2))
    worst = WorstImages(1)
    worst.offer(_rows([0.5, 0.1, 0.9]), images, depth, depth, depth > 0, [4, 5, 6])
    assert [(item["abs_rel"], item["frame"]) for item in worst.items] == [(0.9, 6)]
    masked = WorstImages(1)
    masked.offer(_rows([0.9]), images[:1], depth[:1], depth[:1] * 2, np.zeros((1, 2, 2), bool), [0])
    shown = WorstImages(1)
    shown.offer(_rows([0.9]), images[:1], depth[:1], depth[:1] * 2, np.ones((1, 2, 2), bool), [0])
    assert not np.array_equal(masked.items[0]["panel"], shown.items[0]["panel"])


def test_the_summary_table_is_well_formed_markdown():
    """Header, separator and rows have one cell count (GitHub's Markdown shows no table otherwise); modes
    in protocol order, a missing mode or an entry without scenes left out, undefined values as '-'."""
    from depthpe.evaluation.outputs import format_summary

    entry = {"n_scenes": 2, "n_images": 6, "abs_rel": 0.12345, "delta1": float("nan")}
    summary = {"b": {"scene_aligned": entry, "native": entry}, "a": {"image_aligned": {}, "scene_aligned": entry}}
    lines = format_summary(summary, ("abs_rel", "delta1")).splitlines()
    assert {line.count("|") for line in lines} == {7}
    assert set(lines[1]) == {"|", "-"}
    assert lines[2:] == ["| a | scene_aligned | 2 | 6 | 0.1235 | - |", "| b | native | 2 | 6 | 0.1235 | - |",
                         "| b | scene_aligned | 2 | 6 | 0.1235 | - |"]
