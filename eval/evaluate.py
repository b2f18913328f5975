"""Evaluate a depthpe model from a repository checkout (the same as ``depthpe eval``).

    python eval/evaluate.py --model runs/quickstart/final --data data --out runs/quickstart/eval
    accelerate launch eval/evaluate.py ...          # several processes split the scenes

All logic lives in ``depthpe.evaluation`` (``command.run_evaluation``); the protocol is in docs/evaluation.md.
"""

import sys

from depthpe.eval import main

if __name__ == "__main__":
    sys.exit(main())
