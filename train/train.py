"""Train a depthpe model from a repository checkout (the same as ``depthpe train``).

    accelerate launch train/train.py --config configs/quickstart.yaml [--resume latest] [key=value ...]
    python train/train.py --config configs/quickstart.yaml          # one process, same thing

All logic lives in ``depthpe.run``; see docs/training.md.
"""

import sys

from depthpe.train import main

if __name__ == "__main__":
    sys.exit(main())
