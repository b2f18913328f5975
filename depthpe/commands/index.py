"""``depthpe index ROOT``: rebuild index.json for folders of scene files written by other tools."""

from __future__ import annotations

import argparse

from ..config import ConfigError
from ..config.options import add_options, config_from_args
from depthpe.scenes.format.check_config import WORKER_LIMIT, IndexConfig

DESCRIPTION = """\
Rebuild ROOT/**/index.json from the scene files themselves: every folder under ROOT that holds
*.h5 files gets an index listing its usable scene files. Use it for scene files written by other
tools or copied together by hand, or when an index was written in another shape (training,
evaluation and `depthpe check` refuse a malformed index).

Each file is opened the way training opens it (format attributes, datasets and shapes within the
format's limits, valid cameras) and its entry is validated (field types, no scene id twice).
Files that fail are left out, and each is printed with the reason. The index's dataset and split
are those all files agree on, else the parent folder's and the folder's names. An existing index
that differs is kept as index.json.bak. The index is written atomically. Files are opened by
--workers processes when there are many (a progress bar shows the rate and the time left); the
indexes written do not depend on the worker count.

Exit status: 0 when every folder got an index, 1 when a folder has no usable scene file or when
files were skipped, 2 when ROOT is not a folder or holds no *.h5 file. Run `depthpe check ROOT`
afterwards to validate depth, images and multi-view consistency."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``depthpe index``: the fields of ``IndexConfig``, ``--config FILE`` and ``key=value``."""
    add_options(parser, IndexConfig)


def run(args: argparse.Namespace) -> int:
    """Rebuild the indexes under ROOT, print what was listed and skipped; the exit status."""
    from depthpe.scenes.parallel import WorkerDied, resolve_workers
    from depthpe.scenes.format.reindex import rebuild_indexes

    try:
        cfg = config_from_args(IndexConfig, args)
        workers = resolve_workers(cfg.workers, limit=WORKER_LIMIT)
        results = rebuild_indexes(cfg.root, dry_run=cfg.dry_run, workers=workers, progress=cfg.progress)
    except (ConfigError, FileNotFoundError, WorkerDied) as err:
        print(f"error: {err}")
        return 2
    if not results:
        print(f"error: no *.h5 scene files under {cfg.root}")
        return 2
    for r in results:
        action = "would list" if cfg.dry_run else ("listed" if r.written else "no index written:")
        print(f"{r.folder}: {action} {len(r.entries)} scene(s) (dataset {r.dataset!r}, split {r.split!r}), "
              f"{len(r.skipped)} skipped" + (" (old index kept as index.json.bak)" if r.backed_up else ""))
        for name, reason in r.skipped:
            print(f"  skipped {name}: {reason}")
    skipped = sum(len(r.skipped) for r in results)
    empty = sum(not r.entries for r in results)
    print(f"{len(results)} folder(s), {sum(len(r.entries) for r in results)} scene(s) listed, "
          f"{skipped} file(s) skipped" + ("; run `depthpe check` next" if not cfg.dry_run else ""))
    return 1 if skipped or empty else 0
