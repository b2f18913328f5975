"""A child process that holds a run folder's lock until its stdin closes: run it with
``subprocess.Popen([sys.executable, "-c", HOLD_LOCK, folder], stdin=PIPE, stdout=PIPE, text=True)`` and
wait for its line ``held``."""


HOLD_LOCK = """
import sys
from pathlib import Path
from depthpe.run.lock import acquire_lock
held = acquire_lock(Path(sys.argv[1]))  # kept: the lock lives as long as its object
print("held", flush=True)
sys.stdin.read()  # hold the lock until the test kills this process
"""
