"""Train a depthpe model.

    accelerate launch train/train.py --config configs/quickstart.yaml [--resume latest] [key=value ...]
    python train/train.py --config configs/quickstart.yaml          # one process, same thing

All logic lives in ``depthpe.training``; see the README for the config format.
"""

import sys

from depthpe.training import main

if __name__ == "__main__":
    sys.exit(main())
