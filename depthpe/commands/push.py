"""``depthpe push DIR --repo-id ID``: upload an exported model (or a run's final model) to the Hub."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "push an exported model or a run's final model to the Hugging Face Hub"
DESCRIPTION = """\
Upload an exported depthpe model (config.json, model.safetensors and a regenerated README.md model
card) to the root of a Hugging Face Hub model repository, creating the repository if needed.

DIR may be an exported model folder (runs/NAME/final, runs/NAME/checkpoints/step_N[/model]) or a
run folder (runs/NAME: its final/ is pushed). The card shows the run's training config
(runs/NAME/config.yaml) and an evaluation table: --eval (the summary.json or the --out folder of
eval/evaluate.py), else the run's latest validation (runs/NAME/val_summary.json).
The card is also written into the local model folder (README.md), so both copies agree.

The token comes from HF_TOKEN or `hf auth login`; it is never printed. HF_ENDPOINT selects another
Hub. A failed upload is retried with back-off; the exit status is 1 if it finally fails."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="exported model folder or run folder")
    parser.add_argument("--repo-id", required=True, metavar="ID", help="Hub repository, e.g. user/depthpe-prope")
    parser.add_argument("--private", action="store_true", help="create the repository private (if it is new)")
    parser.add_argument("--revision", default=None, metavar="REV",
                        help="branch to push to (created from main if missing; default: main)")
    parser.add_argument("--tag", default=None, metavar="TAG", help="also tag the new commit (e.g. v1.0)")
    parser.add_argument("--eval", default=None, metavar="PATH",
                        help="summary.json (or output folder) of eval/evaluate.py to show on the card")
    parser.add_argument("--license", default=None, metavar="ID",
                        help="licence of the weights on the card (default: the run's hub.license, else apache-2.0)")
    parser.add_argument("--retries", type=int, default=3, metavar="N", help="retries after a failure (default 3)")
    parser.add_argument("--retry-delay", type=float, default=5.0, metavar="S",
                        help="first retry delay in seconds, doubled each time (default 5)")


def _load_eval(path: str) -> tuple[dict, str]:
    """(summary, note) from an eval/evaluate.py summary.json or its output folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    if not p.is_file():
        raise FileNotFoundError(f"--eval {path}: no summary.json there (pass the --out folder of eval/evaluate.py)")
    doc = json.loads(p.read_text())
    if not isinstance(doc, dict) or not isinstance(doc.get("summary"), dict):
        raise ValueError(f"--eval {p}: not an eval/evaluate.py summary.json (no 'summary' mapping)")
    meta = doc.get("meta") or {}
    bits = [f"{k} {meta[k]}" for k in ("split", "views", "seed", "image_width") if meta.get(k) is not None]
    note = "Evaluation with eval/evaluate.py" + (f" ({', '.join(bits)})" if bits else "")
    return doc["summary"], note


def run(args: argparse.Namespace) -> int:
    import yaml

    from ..hub import VAL_SUMMARY_NAME, HubPusher, resolve_model_folder, validation_card_fields
    from ..model_card import DEFAULT_LICENSE, card_info_for_folder, write_model_card

    try:
        folder, run_dir = resolve_model_folder(args.dir)
        run_config = yaml.safe_load((run_dir / "config.yaml").read_text()) if run_dir else None
        fields: dict = {}
        if args.eval:
            fields["eval_summary"], fields["eval_note"] = _load_eval(args.eval)
        elif run_dir and (run_dir / VAL_SUMMARY_NAME).is_file():
            fields = validation_card_fields(json.loads((run_dir / VAL_SUMMARY_NAME).read_text()))
        state = next((p / "trainer_state.json" for p in (folder, folder.parent) if (p / "trainer_state.json").is_file()), None)
        step = json.loads(state.read_text()).get("step") if state else None
        license = args.license or ((run_config or {}).get("hub") or {}).get("license") or DEFAULT_LICENSE
        total = ((run_config or {}).get("train") or {}).get("steps")
        info = card_info_for_folder(folder, repo_id=args.repo_id, revision=args.tag or args.revision,
                                    run_config=run_config, step=step, total_steps=total,
                                    final=folder.name == "final", license=license, **fields)
        write_model_card(folder, info)
        pusher = HubPusher(args.repo_id, private=args.private, revision=args.revision, retries=args.retries,
                           retry_delay=args.retry_delay, log=print)
    except (FileNotFoundError, ValueError) as err:
        print(f"depthpe push: {err}")
        return 2
    handle = pusher.push(folder, paths_in_repo=("",), tag=args.tag,
                         message=f"depthpe push: {folder.name}" + (f" (step {step})" if step is not None else ""))
    handle.wait()
    if not handle.result.ok:
        print(f"depthpe push: failed: {handle.result.error}")
        return 1
    where = f" (branch {args.revision})" if args.revision else ""
    print(f"pushed {folder} to {args.repo_id}{where}; load with "
          f'DepthModel.from_pretrained("{args.repo_id}"{f", revision={args.tag or args.revision!r}" if (args.tag or args.revision) else ""})')
    return 0
