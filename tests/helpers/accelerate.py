"""The shipped accelerate config files and how `accelerate launch` reads them."""

from pathlib import Path

from accelerate.commands.launch import _validate_launch_command, launch_command_parser

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs" / "accelerate"


def launch_args(name: str):
    """The argparse namespace `accelerate launch --config_file <name> train/train.py` works with."""
    args = launch_command_parser().parse_args(["--config_file", str(CONFIG_DIR / name), "train/train.py"])
    return _validate_launch_command(args)[0]
