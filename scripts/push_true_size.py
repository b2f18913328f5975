"""Push a large export (the true-size rehearsal's final/, 3.77 GB) to the test suite's Hub-compatible
server over the LFS multipart path: a push killed after 3 of its parts, its rerun, and a rerun with
nothing new; prints JSON (docs/benchmarks.md). Run from a repository checkout (it uses
tests/helpers/hub_server.py) after `depthpe bench rehearsal --config vggt1b_prope --out /tmp/rehearsal`:

    python scripts/push_true_size.py [FINAL_DIR]      # default /tmp/rehearsal/run/final
"""
import hashlib, json, os, re, subprocess, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.hub_server import FakeHub  # noqa: E402

FINAL = sys.argv[1] if len(sys.argv) > 1 else "/tmp/rehearsal/run/final"
REPO = "user/vggt1b-prope"


def sha256(path):
    """Hex sha256 of a file, read in 16 MiB blocks (the LFS object id)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def timed_push(env, log):
    """Run `depthpe push FINAL` under /usr/bin/time -v with ``env``; its output goes to ``log``.
    Returns {"rc", "wall_s", "max_rss_mb"}."""
    start = time.time()
    p = subprocess.run(["/usr/bin/time", "-v", "depthpe", "push", FINAL, "--repo-id", REPO],
                       env=env, capture_output=True, text=True)
    wall = time.time() - start
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    open(log, "w").write(p.stdout + p.stderr)
    return {"rc": p.returncode, "wall_s": round(wall, 1), "max_rss_mb": int(rss.group(1)) // 1024 if rss else None}


with FakeHub(lfs_from=10_000_000, lfs_chunk=512 * 2**20) as hub:  # LFS over 10 MB, parts of 512 MiB
    env = hub.env(dict(os.environ))
    out = {"file_bytes": os.path.getsize(f"{FINAL}/model.safetensors")}
    # 1. interrupted: SIGKILL 5 s after the first LFS request
    start = time.time()
    p = subprocess.Popen(["depthpe", "push", FINAL, "--repo-id", REPO], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None and hub.lfs_puts < 3:  # 3 of the 8 parts of 512 MiB sent
        time.sleep(0.05)
    p.kill(); p.wait()
    out["interrupted"] = {"killed_after_s": round(time.time() - start, 1), "lfs_puts": hub.lfs_puts,
                          "repo_exists": REPO in hub.repos,
                          "model_committed": bool(REPO in hub.repos and any("model.safetensors" in c["files"] for c in hub.repos[REPO].commits.values()))}
    # 2. the rerun completes
    before = hub.lfs_puts
    out["rerun"] = {**timed_push(env, os.path.join(FINAL, "..", "push_rerun.log")), "lfs_puts": hub.lfs_puts - before}
    repo = hub.repo(REPO)
    files = repo.commits[repo.branches["main"]]["files"]
    stored = [f for f in hub.lfs_dir.iterdir()]
    out["stored_files"] = sorted(files)
    t = time.time()
    local = sha256(f"{FINAL}/model.safetensors")
    out["sha256_local_s"] = round(time.time() - t, 1)
    out["sha256_equal"] = any(f.name == local for f in stored)
    ref = files["model.safetensors"]
    out["model_on_hub"] = {"oid_is_local_sha256": getattr(ref, "oid", None) == local, "size": getattr(ref, "size", None)}
    # 3. nothing new: a second rerun
    before = hub.lfs_puts
    out["again"] = {**timed_push(env, os.path.join(FINAL, "..", "push_again.log")), "lfs_puts": hub.lfs_puts - before}
    out["requests"] = len(hub.requests)
print(json.dumps(out, indent=1))
