"""Evaluate a depthpe model on held-out scenes.

    python eval/evaluate.py --model runs/quickstart/final --data data --out runs/quickstart/eval
    accelerate launch eval/evaluate.py ...          # several processes split the scenes

All logic lives in ``depthpe.evaluation``; the protocol is documented there and in the README.
"""

import sys

from depthpe.evaluation import main

if __name__ == "__main__":
    sys.exit(main())
