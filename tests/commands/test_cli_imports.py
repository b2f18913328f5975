"""`depthpe --help` and `depthpe COMMAND --help` import no command's heavy dependencies: a command's
module is imported only when argparse reaches its name (depthpe.commands.subcommands)."""

from __future__ import annotations

import json
import subprocess
import sys

from depthpe.cli import COMMANDS
from depthpe.commands.bench import BENCHMARKS

_PROBE = """
import json, sys
from depthpe.cli import main
heavy = ("torch", "cv2", "h5py", "timm", "accelerate")
report = {}
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
    report[" ".join(argv)] = [m for m in heavy if m in sys.modules]
print("REPORT" + json.dumps(report))
"""


def _imports_after(argvs: list[list[str]]) -> dict[str, list[str]]:
    """Heavy modules imported after each ``depthpe ARGV`` in one fresh interpreter (cumulative)."""
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argvs)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return json.loads(out.split("REPORT", 1)[1])


def test_help_of_every_command_imports_no_torch():
    argvs = [["--help"], *[[name, "--help"] for name in COMMANDS]]
    report = _imports_after(argvs)
    assert set(report) == {" ".join(a) for a in argvs}
    assert all(not heavy for heavy in report.values()), report


def test_a_command_module_is_imported_only_when_it_is_chosen():
    code = ("import sys\nfrom depthpe.cli import main\ntry:\n    main(['eval', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('depthpe.commands.') or m.startswith('depthpe.bench.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded = eval(out.stdout.strip().splitlines()[-1])
    assert "depthpe.commands.eval" in loaded
    assert not [m for m in loaded if m.rsplit(".", 1)[-1] in {"train", "predict", "convert", "push", "synth"}]
    assert not [m for m in loaded if m.startswith("depthpe.bench.")]


def test_bench_lists_every_benchmark_without_importing_them(capsys):
    from depthpe.cli import main

    try:
        main(["bench", "--help"])
    except SystemExit:
        pass
    text = capsys.readouterr().out
    assert all(name in text for name in BENCHMARKS)
    assert "predict peak training memory" in text  # the one-line help comes from the table


def test_python_m_depthpe_runs_the_cli():
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "depthpe", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "COMMAND" in out.stdout
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "depthpe.cli" in imported and "torch" not in imported
