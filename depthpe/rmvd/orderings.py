"""Which source views go with a keyview.

``index_distance`` (the headline, no ground truth used): the keyview plus up to N source views,
the nearest in list index first (ties: the lower index first).

The oracle orderings of RMVD evaluate growing view sets, 1..N source views, and keep the best
AbsRel per sample, so they use the ground truth and are labelled as oracle numbers:

- ``nearest``: the source views in index-distance order; set n = the first n of them.
- ``quasi-optimal``: every (keyview, one source view) pair is scored first; the source views are
  ordered by that pair's AbsRel (best first; a tie: the lower view index); set n = the first n of that order.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

__all__ = ["ORDERINGS", "ORACLE_ORDERINGS", "DEFAULT_SOURCE_VIEWS", "index_distance_order", "view_set",
           "headline_views", "quasi_optimal_order", "oracle_best"]

DEFAULT_SOURCE_VIEWS = 7
ORACLE_ORDERINGS = ("nearest", "quasi-optimal")
ORDERINGS = ("index_distance",) + ORACLE_ORDERINGS

# views (sorted view indices, the keyview included) -> metrics dict with "abs_rel"
Scorer = Callable[[tuple[int, ...]], dict]


def index_distance_order(keyview: int, num_views: int) -> list[int]:
    """The source-view indices (all but ``keyview`` of 0..num_views-1) by |index - keyview|,
    the lower index first on a tie."""
    return sorted((i for i in range(num_views) if i != keyview), key=lambda i: (abs(i - keyview), i))


def view_set(keyview: int, ordered_sources: Sequence[int], n: int) -> tuple[int, ...]:
    """The keyview and the first ``n`` of ``ordered_sources``, as sorted view indices."""
    return tuple(sorted([keyview, *ordered_sources[:n]]))


def headline_views(keyview: int, num_views: int, max_sources: int = DEFAULT_SOURCE_VIEWS) -> tuple[int, ...]:
    """The headline view set: the keyview and up to ``max_sources`` index-nearest source views."""
    return view_set(keyview, index_distance_order(keyview, num_views), max_sources)


def quasi_optimal_order(keyview: int, num_views: int, score: Scorer) -> list[int]:
    """The source views ordered by the AbsRel of the (keyview, source) pair, best first (a NaN
    AbsRel last; ties in view-index order, as the reference's stable sort of the views in list order)."""
    pair = {s: score(view_set(keyview, [s], 1))["abs_rel"] for s in range(num_views) if s != keyview}
    return sorted(pair, key=lambda s: math.inf if math.isnan(pair[s]) else pair[s])


def oracle_best(keyview: int, num_views: int, ordering: str, score: Scorer,
                max_sources: int = DEFAULT_SOURCE_VIEWS) -> dict:
    """The best-AbsRel metrics over the sets of 1..min(max_sources, num_views - 1) source views in
    ``ordering`` (one of ``ORACLE_ORDERINGS``), with "views" (the set used) and "num_sources" added.
    A sample with no source view is scored with the keyview alone. The first finite minimum wins."""
    if ordering == "quasi-optimal":
        order = quasi_optimal_order(keyview, num_views, score)
    else:
        order = index_distance_order(keyview, num_views)
    best = None
    for n in range(1 if order else 0, min(max_sources, len(order)) + 1):
        views = view_set(keyview, order, n)
        metrics = score(views)
        if best is None or (not math.isnan(metrics["abs_rel"]) and
                            (math.isnan(best["abs_rel"]) or metrics["abs_rel"] < best["abs_rel"])):
            best = {**metrics, "views": views, "num_sources": n}
    return best
