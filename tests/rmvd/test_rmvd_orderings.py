"""Source-view orderings of RMVD (depthpe.rmvd.orderings): the headline index-distance set and the
two oracle orderings, with hand-computed answers."""

from depthpe.rmvd import orderings


def test_index_distance_order_and_headline_set():
    assert orderings.index_distance_order(2, 6) == [1, 3, 0, 4, 5]
    assert orderings.headline_views(2, 6, max_sources=3) == (0, 1, 2, 3)
    assert orderings.headline_views(0, 12) == tuple(range(8))  # keyview + 7 by default
    assert orderings.headline_views(0, 1) == (0,)


def _scorer(table, calls):
    def score(views):
        calls.append(views)
        return {"abs_rel": table[views], "inliers": 0.0, "scale": 1.0}
    return score


def test_nearest_oracle_keeps_the_best_growing_set():
    # keyview 1 of 4 views: nearest order 0, 2, 3 -> sets (0,1), (0,1,2), (0,1,2,3)
    table = {(0, 1): 5.0, (0, 1, 2): 3.0, (0, 1, 2, 3): 4.0}
    calls = []
    best = orderings.oracle_best(1, 4, "nearest", _scorer(table, calls), max_sources=7)
    assert calls == [(0, 1), (0, 1, 2), (0, 1, 2, 3)]
    assert best["abs_rel"] == 3.0 and best["views"] == (0, 1, 2) and best["num_sources"] == 2


def test_quasi_optimal_orders_by_pair_score_then_grows():
    # keyview 0 of 4: pairs (0,1)=6, (0,2)=2, (0,3)=4 -> order 2, 3, 1 -> sets (0,2), (0,2,3), (0,1,2,3)
    table = {(0, 1): 6.0, (0, 2): 2.0, (0, 3): 4.0, (0, 2, 3): 1.5, (0, 1, 2, 3): 1.8}
    calls = []
    best = orderings.oracle_best(0, 4, "quasi-optimal", _scorer(table, calls))
    assert calls[:3] == [(0, 1), (0, 2), (0, 3)] and calls[3:] == [(0, 2), (0, 2, 3), (0, 1, 2, 3)]
    assert best["views"] == (0, 2, 3) and best["abs_rel"] == 1.5 and best["num_sources"] == 2


def test_quasi_optimal_ties_go_to_the_lower_view_index():
    # keyview 2 of 4: index distance would put 1 and 3 before 0; equal pair scores keep index order
    table = {(0, 2): 1.0, (1, 2): 1.0, (2, 3): 1.0}
    assert orderings.quasi_optimal_order(2, 4, _scorer(table, [])) == [0, 1, 3]


def test_quasi_optimal_puts_a_nan_pair_last_and_keeps_the_others_sorted():
    # keyview 0 of 4: the middle source view 2 has a NaN pair score -> order 3, 1, then 2
    table = {(0, 1): 5.0, (0, 2): float("nan"), (0, 3): 1.0}
    assert orderings.quasi_optimal_order(0, 4, _scorer(table, [])) == [3, 1, 2]


def test_oracle_respects_max_sources_and_skips_nan():
    table = {(0, 1): float("nan"), (0, 1, 2): 9.0}
    best = orderings.oracle_best(0, 4, "nearest", _scorer(table, []), max_sources=2)
    assert best["views"] == (0, 1, 2) and best["abs_rel"] == 9.0


def test_a_sample_without_source_views_is_scored_on_its_keyview_alone():
    calls = []
    best = orderings.oracle_best(0, 1, "nearest", _scorer({(0,): 7.0}, calls))
    assert calls == [(0,)] and best["views"] == (0,) and best["num_sources"] == 0 and best["abs_rel"] == 7.0


def test_the_first_of_equal_minima_wins():
    table = {(0, 1): 2.0, (0, 1, 2): 2.0, (0, 1, 2, 3): 3.0}
    best = orderings.oracle_best(0, 4, "nearest", _scorer(table, []))
    assert best["views"] == (0, 1) and best["num_sources"] == 1  # the smaller set, as documented
