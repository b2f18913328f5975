"""``depthpe.config.options`` field by field, on a toy settings dataclass that has one field of every
kind the commands use: what each becomes on the command line, what it parses to, what the help says."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from depthpe.config.options import REQUIRED, add_options, add_plain_options, check_required, flag_of, option


@dataclasses.dataclass
class Toy:
    name: str = option(REQUIRED, positional=True, choices=("a", "b"), help="which one")
    views: int = option(8, help="views per scene")
    sizes: list[int] = option(default_factory=lambda: [1, 2], help="sizes")
    shifts: list[str] = option(default_factory=list, append=True, flag="--shift", help="shifts, one per flag")
    hw: tuple[int, int] = option((3, 4), metavar=("H", "W"), help="height and width")
    progress: bool = option(True, store_false=True, flag="--quiet", help="no progress bars")
    fast: bool = option(False, help="go fast")
    device: str | None = option(None, help="none: the default device")
    tag: str | None = option(None, help="a tag")
    width: int | None = option(None, help="width in pixels")
    secret: int = option(0, hidden=True, help="for the command's own child processes")


def _plain(argv):
    parser = argparse.ArgumentParser(prog="toy")
    add_plain_options(parser, Toy)
    return parser, parser.parse_args(argv)


def test_each_kind_of_field_parses_to_its_type():
    _, args = _plain(["a"])
    assert (args.name, args.views, args.sizes, args.shifts, args.hw, args.progress, args.fast) == (
        "a", 8, [1, 2], [], (3, 4), True, False)
    _, args = _plain(["b", "--views", "3", "--sizes", "5", "6", "--shift", "x", "--shift", "y", "--hw", "7", "9",
                      "--quiet", "--fast", "--width", "64"])
    assert (args.name, args.views, args.sizes, args.shifts, args.hw, args.progress, args.fast, args.width) == (
        "b", 3, [5, 6], ["x", "y"], [7, 9], False, True, 64)
    assert _plain(["a", "--fast", "--no-fast"])[1].fast is False
    assert _plain(["a", "--sizes"])[1].sizes == []  # a list takes any number of values


@pytest.mark.parametrize("argv", [[], ["c"], ["a", "--hw", "7"], ["a", "--views", "x"], ["a", "--width", "1.5"]])
def test_a_missing_positional_a_bad_choice_or_count_and_a_bad_number_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        _plain(argv)
    assert "error:" in capsys.readouterr().err


def test_the_help_shows_each_default_as_the_command_line_writes_it():
    text = " ".join(_plain(["a"])[0].format_help().split())
    for line in ("views per scene (default: 8)", "sizes (default: 1 2)", "height and width (default: 3 4)",
                 "go fast (default: false)", "a tag (default: none)", "width in pixels (default: none)",
                 "shifts, one per flag (default: none)", "--hw H W", "--shift SHIFT"):
        assert line in text, line
    assert "none: the default device (default" not in text  # the help explains none itself
    assert "no progress bars" in text and "no progress bars (default" not in text  # a flag, no value
    assert "--secret" not in text and "child processes" not in text  # hidden


def test_with_config_and_overrides_options_not_given_stay_out_of_the_namespace():
    parser = argparse.ArgumentParser(prog="toy")
    add_options(parser, Toy)
    args = parser.parse_args(["views=3"])  # a key=value where the positional could be
    assert args.name == "views=3" and not hasattr(args, "views") and args.overrides == []
    from depthpe.cli import parse  # key=value after an option: argparse leaves it over, the CLI takes it

    args = parse(parser, ["a", "--views", "2", "k=v"])
    assert (args.name, args.views, args.overrides) == ("a", 2, ["k=v"])
    text = " ".join(parser.format_help().split())
    assert "{a,b}" in text and "e.g. 'views: 8'" in text and "e.g. views=8" in text


def test_flags_of_fields_and_the_required_message():
    assert [flag_of(Toy, n) for n in ("name", "views", "shifts", "progress")] == ["NAME", "--views", "--shift", "--quiet"]
    with pytest.raises(ValueError, match=r"^NAME is required \(or 'name:' in --config FILE\)$"):
        check_required(Toy())
    check_required(Toy(name="a"))


@dataclasses.dataclass
class Needs:
    model: str = option(REQUIRED, help="the model")
    where: str = option("here", positional=True, help="where to go")


def test_plain_options_require_a_required_field_and_let_a_positional_with_a_default_be_left_out(capsys):
    parser = argparse.ArgumentParser(prog="needs")
    add_plain_options(parser, Needs)
    with pytest.raises(SystemExit):
        parser.parse_args([])
    assert "the following arguments are required: --model" in capsys.readouterr().err
    assert vars(parser.parse_args(["--model", "m"])) == {"model": "m", "where": "here"}
    assert parser.parse_args(["there", "--model", "m"]).where == "there"
