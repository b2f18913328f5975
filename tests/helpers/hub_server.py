"""A small Hugging Face Hub-compatible HTTP server for offline tests (loopback only).

huggingface_hub 2.x talks through ``httpx2``, which request-mocking libraries do not see, so tests
run this server on ``127.0.0.1:<free port>`` and point the client at it: a subprocess gets
``HF_ENDPOINT=<server.url>`` in its environment (``server.env()``), an in-process ``HfApi`` gets
``endpoint=server.url``.

Implemented (only what ``create_repo``, ``create_commit``/``upload_folder``, ``create_branch``,
``create_tag``/``delete_tag``, ``repo_info(revision=)``, ``list_repo_refs`` and
``hf_hub_download`` call)::

    POST   /api/repos/create                       {"name", "organization", "private"} -> {"url"}
    POST   /api/validate-yaml                      -> {"errors": [], "warnings": []}
    POST   /api/models/<repo>/preupload/<rev>      -> every file "regular" (bytes come in the commit)
    POST   /api/models/<repo>/commit/<rev>         NDJSON header/file/deletedFile/deletedFolder lines
    POST   /api/models/<repo>/branch/<branch>      {"startingPoint"?}        (409 if it exists)
    DELETE /api/models/<repo>/branch/<branch>
    POST   /api/models/<repo>/tag/<rev>            {"tag", "message"?}       (409 if it exists: HubPusher
                                                   then moves the tag with DELETE + POST)
    DELETE /api/models/<repo>/tag/<tag>
    GET    /api/models/<repo>/revision/<rev>       {"id", "sha", "siblings", "private"}
    GET    /api/models/<repo>/refs                 {"branches", "tags", "converts"}
    HEAD/GET /<repo>/resolve/<rev>/<path>          file bytes + X-Repo-Commit, ETag, Content-Length

With ``FakeHub(lfs_from=N)`` files of N bytes or more take the large-file (LFS) path that real
multi-GB weights take: preupload answers "lfs", and::

    POST   /<repo>.git/info/lfs/objects/batch      upload actions per object (none if already stored)
    PUT    /lfs/<oid>                              basic transfer: the whole file in one request
    PUT    /lfs/<oid>/part/<n>                     multipart transfer (objects over ``lfs_chunk``
    POST   /lfs/<oid>/complete                     bytes): parts, then the completion request

LFS objects are streamed to files in a temporary folder (removed by ``stop()``), checked against
their sha256, and committed by ``lfsFile`` lines; ``lfs_puts`` counts the PUT requests, so a test
can see that an object already stored is not sent again.

Anything else answers 404 and is recorded in ``unknown`` so a test can show what the client asked.
Failures are injected per request kind (``"create"``, ``"preupload"``, ``"commit"``, ``"tag"``,
``"branch"``): ``FakeHub(fail={"commit": 2})`` answers the first two commits with HTTP 500,
``fail={"create": -1}`` fails every repo creation. ``FakeHub(hold_commits=True)`` keeps commit
requests waiting until ``hub.hold.set()``. ``FakeHub(stall=True)`` accepts every request and
answers none until ``hub.unstall.set()`` (then it answers normally): a Hub that hangs. ``stop()`` (the
end of the ``with`` block) sets both events first, so no handler thread outlives the test. Avoid
failing ``preupload`` in fast tests: the client retries it itself with back-off (1 s, 2 s, 4 s, ...).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

__all__ = ["FakeHub", "FakeRepo", "LfsRef"]


@dataclass(frozen=True)
class LfsRef:
    """A committed LFS file: its sha256 ``oid`` and size; the bytes are in ``hub.lfs_dir / oid``."""

    oid: str
    size: int

    def read(self, hub: "FakeHub") -> bytes:
        return (hub.lfs_dir / self.oid).read_bytes()


@dataclass
class FakeRepo:
    """One model repository: commits (oid -> {path: bytes}), branches and tags (name -> oid)."""

    repo_id: str
    private: bool
    commits: dict = field(default_factory=dict)  # oid -> {"files": {path: bytes}, "parent", "message"}
    branches: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)

    def resolve(self, revision: str) -> str | None:
        """Commit oid of a branch, tag or (full) commit id; None when unknown."""
        if revision in self.branches:
            return self.branches[revision]
        if revision in self.tags:
            return self.tags[revision]
        return revision if revision in self.commits else None


class FakeHub:
    """The server; use as a context manager (``with FakeHub() as hub: ... hub.url ...``)."""

    def __init__(self, fail: dict[str, int] | None = None, fail_status: int = 500, hold_commits: bool = False,
                 stall: bool = False, lfs_from: int | None = None, lfs_chunk: int | None = None):
        self.fail = dict(fail or {})
        self.lfs_from, self.lfs_chunk = lfs_from, lfs_chunk
        self.lfs_dir: Path | None = None  # stored LFS objects, <oid> files (created by start())
        self.lfs_puts = 0
        # While ``hold`` is clear, commit requests wait (at most 60 s): lets a test look at the client
        # side while an upload is in flight. Created set unless ``hold_commits``.
        self.hold = threading.Event()
        if not hold_commits:
            self.hold.set()
        # While ``unstall`` is clear, every request waits without an answer (until stop() at the latest).
        self.unstall = threading.Event()
        if not stall:
            self.unstall.set()
        self.stalled = 0  # requests that had to wait on ``unstall``
        self.fail_status = fail_status
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        self.failed: list[tuple[str, str]] = []  # (kind, path) of injected failures
        self.unknown: list[tuple[str, str]] = []
        self.authorizations: set[str] = set()  # Authorization headers seen
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeHub":
        self.lfs_dir = Path(tempfile.mkdtemp(prefix="fakehub-lfs-"))
        handler = type("Handler", (_Handler,), {"hub": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.hold.set()  # release waiting handlers so that they end with the test
        self.unstall.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self.lfs_dir is not None:
            shutil.rmtree(self.lfs_dir, ignore_errors=True)

    def __enter__(self) -> "FakeHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def env(self, base: dict | None = None, token: str = "hf_fake_token", home: str | None = None) -> dict:
        """Environment for a subprocess that should talk to this server (online, fake token)."""
        env = dict(base or {})
        env.update(HF_ENDPOINT=self.url, HF_TOKEN=token, HF_HUB_OFFLINE="0", HF_HUB_DISABLE_TELEMETRY="1",
                   HF_HUB_DISABLE_XET="1")
        if home is not None:
            env["HF_HOME"] = home
        return env

    # ------------------------------------------------------------------ test helpers
    def repo(self, repo_id: str) -> FakeRepo:
        return self.repos[repo_id]

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """{path: bytes} of the repository at ``revision`` (branch, tag or commit)."""
        repo = self.repos[repo_id]
        oid = repo.resolve(revision)
        if oid is None:
            raise KeyError(f"{repo_id}: unknown revision {revision!r}")
        return {path: data.read(self) if isinstance(data, LfsRef) else data
                for path, data in repo.commits[oid]["files"].items()}

    # ------------------------------------------------------------------ state changes
    def should_fail(self, kind: str) -> bool:
        with self.lock:
            left = self.fail.get(kind, 0)
            if left == 0:
                return False
            if left > 0:
                self.fail[kind] = left - 1
            return True


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError:  # the client gave up waiting (a stalled request that timed out)
            pass

    # ------------------------------------------------------------------ plumbing
    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, payload=None, *, data: bytes | None = None, headers: dict | None = None,
              head: bool = False) -> None:
        if data is None:
            data = json.dumps(payload if payload is not None else {}).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, {"error": message}, headers=headers, head=self.command == "HEAD")

    def _route(self, method: str) -> None:
        hub = self.hub
        path = urlsplit(self.path).path
        body = self._body() if method in ("POST", "PUT", "DELETE") else b""
        with hub.lock:
            hub.requests.append((method, path))
            if self.headers.get("Authorization"):
                hub.authorizations.add(self.headers["Authorization"])
            hub.stalled += not hub.unstall.is_set()
        hub.unstall.wait(300)  # stop() sets it; 300 s only bounds a test that forgot to stop
        parts = path.strip("/").split("/")
        try:
            if method == "POST" and path == "/api/repos/create":
                return self._create_repo(json.loads(body or b"{}"))
            if method == "POST" and path == "/api/validate-yaml":
                return self._send(200, {"errors": [], "warnings": []})
            if method == "POST" and path.endswith(".git/info/lfs/objects/batch"):
                return self._lfs_batch(json.loads(body))
            if method == "POST" and parts[0] == "lfs" and parts[-1] == "complete":
                return self._lfs_complete(parts[1], json.loads(body))
            if len(parts) >= 5 and parts[:2] == ["api", "models"]:
                repo_id = f"{unquote(parts[2])}/{unquote(parts[3])}"
                action, rest = parts[4], [unquote(p) for p in parts[5:]]
                return self._repo_api(method, repo_id, action, rest, body)
            if method in ("GET", "HEAD") and len(parts) >= 5 and parts[2] == "resolve":
                repo_id = f"{unquote(parts[0])}/{unquote(parts[1])}"
                return self._resolve(repo_id, unquote(parts[3]), unquote("/".join(parts[4:])), head=method == "HEAD")
        except Exception as err:  # a bug in the fake: answer 400 so the test sees it
            return self._error(400, f"fake hub error: {type(err).__name__}: {err}")
        with hub.lock:
            hub.unknown.append((method, path))
        return self._error(404, f"fake hub: no route for {method} {path}")

    def do_GET(self):
        self._route("GET")

    def do_HEAD(self):
        self._route("HEAD")

    def do_POST(self):
        self._route("POST")

    def do_DELETE(self):
        self._route("DELETE")

    def do_PUT(self):
        """An LFS object or one part of it, streamed to ``hub.lfs_dir`` (never held in memory)."""
        hub = self.hub
        parts = urlsplit(self.path).path.strip("/").split("/")
        with hub.lock:
            hub.requests.append(("PUT", self.path))
            hub.lfs_puts += 1
        if parts[0] != "lfs" or len(parts) not in (2, 4):
            self._body()
            return self._error(404, f"fake hub: no route for PUT {self.path}")
        name = parts[1] if len(parts) == 2 else f"{parts[1]}.part{int(parts[3])}"
        digest = self._stream_to(hub.lfs_dir / f"{name}.tmp")
        if len(parts) == 4:
            os.replace(hub.lfs_dir / f"{name}.tmp", hub.lfs_dir / name)
            return self._send(200, {}, headers={"ETag": f'"{digest}"'})
        return self._store_lfs(parts[1], [hub.lfs_dir / f"{name}.tmp"])

    def _stream_to(self, path: Path) -> str:
        """Write the request body (Content-Length or chunked) to ``path``; returns its sha256."""
        h = hashlib.sha256()
        with open(path, "wb") as f:
            for block in self._body_blocks():
                h.update(block)
                f.write(block)
        return h.hexdigest()

    def _body_blocks(self, size: int = 1 << 20):
        """The request body in blocks of at most ``size`` bytes."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                length = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if length == 0:
                    self.rfile.readline()
                    return
                yield self.rfile.read(length)
                self.rfile.readline()
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            block = self.rfile.read(min(size, left))
            left -= len(block)
            yield block

    def _inject(self, kind: str) -> bool:
        if self.hub.should_fail(kind):
            with self.hub.lock:
                self.hub.failed.append((kind, self.path))
            self._error(self.hub.fail_status, f"injected failure of {kind}")
            return True
        return False

    # ------------------------------------------------------------------ endpoints
    def _create_repo(self, payload: dict) -> None:
        if self._inject("create"):
            return
        name, org = payload["name"], payload.get("organization")
        repo_id = f"{org}/{name}" if org else f"user/{name}"
        hub = self.hub
        url = f"{hub.url}/{repo_id}"
        with hub.lock:
            if repo_id in hub.repos:
                return self._send(409, {"error": "You already created this model repo", "url": url})
            private = bool(payload.get("private")) or payload.get("visibility") == "private"
            repo = FakeRepo(repo_id, private)
            oid = hashlib.sha1(f"init-{repo_id}".encode()).hexdigest()
            repo.commits[oid] = {"files": {}, "parent": None, "message": "initial commit"}
            repo.branches["main"] = oid
            hub.repos[repo_id] = repo
        self._send(200, {"url": url, "name": repo_id})

    def _repo_api(self, method: str, repo_id: str, action: str, rest: list[str], body: bytes) -> None:
        hub = self.hub
        repo = hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, f"Repository {repo_id} not found", "RepoNotFound")
        if method == "GET" and action == "refs":
            def refs(d, prefix):
                return [{"name": n, "ref": f"refs/{prefix}/{n}", "targetCommit": o} for n, o in sorted(d.items())]
            return self._send(200, {"branches": refs(repo.branches, "heads"), "tags": refs(repo.tags, "tags"),
                                    "converts": []})
        rev = "/".join(rest)
        if method == "GET" and action == "revision":
            oid = repo.resolve(rev)
            if oid is None:
                return self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            files = repo.commits[oid]["files"]
            return self._send(200, {"id": repo_id, "modelId": repo_id, "sha": oid, "private": repo.private,
                                    "siblings": [{"rfilename": p} for p in sorted(files)]})
        if method == "POST" and action == "preupload":
            if self._inject("preupload"):
                return
            files = json.loads(body)["files"]
            lfs_from = hub.lfs_from
            return self._send(200, {"files": [{"path": f["path"], "shouldIgnore": False, "uploadMode": "lfs" if
                                               lfs_from is not None and f["size"] >= lfs_from else "regular"}
                                              for f in files]})
        if method == "POST" and action == "commit":
            hub.hold.wait(60)
            if self._inject("commit"):
                return
            return self._commit(repo, rev, body)
        if action == "branch":
            return self._branch(method, repo, rev, body)
        if action == "tag":
            return self._tag(method, repo, rev, body)
        with hub.lock:
            hub.unknown.append((method, self.path))
        return self._error(404, f"fake hub: no route for {method} {self.path}")

    def _branch(self, method: str, repo: FakeRepo, rev: str, body: bytes) -> None:
        """POST creates branch ``rev`` (from ``startingPoint``, default main; 409 if it exists), DELETE removes it."""
        if self._inject("branch"):
            return
        with self.hub.lock:
            if method == "DELETE":
                repo.branches.pop(rev, None)
                return self._send(200, {})
            if rev in repo.branches:
                return self._error(409, f"Reference already exists: refs/heads/{rev}")
            start = json.loads(body or b"{}").get("startingPoint") or "main"
            oid = repo.resolve(start)
            if oid is None:
                return self._error(404, f"Invalid rev id: {start}", "RevisionNotFound")
            repo.branches[rev] = oid
        return self._send(200, {})

    def _tag(self, method: str, repo: FakeRepo, rev: str, body: bytes) -> None:
        """POST tags revision ``rev`` (409 if the tag exists), DELETE removes tag ``rev`` (404 if unknown)."""
        if method == "POST" and self._inject("tag"):
            return
        with self.hub.lock:
            if method == "DELETE":
                if rev not in repo.tags:
                    return self._error(404, f"Tag {rev} not found", "RevisionNotFound")
                del repo.tags[rev]
                return self._send(200, {})
            tag = json.loads(body)["tag"]
            if tag in repo.tags:
                return self._error(409, f"Tag {tag} already exists")
            oid = repo.resolve(rev)
            if oid is None:
                return self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            repo.tags[tag] = oid
        return self._send(200, {})

    def _commit(self, repo: FakeRepo, rev: str, body: bytes) -> None:
        hub = self.hub
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        with hub.lock:
            parent = repo.branches.get(rev)
            if parent is None:
                return self._error(404, f"Invalid rev id: {rev} (commits go to a branch)", "RevisionNotFound")
            files = dict(repo.commits[parent]["files"])
            message = ""
            for line in lines:
                key, value = line["key"], line["value"]
                if key == "header":
                    message = value.get("summary", "")
                elif key == "file":
                    if value.get("encoding", "base64") != "base64":
                        return self._error(400, f"unsupported encoding {value.get('encoding')}")
                    files[value["path"]] = base64.b64decode(value["content"])
                elif key == "lfsFile":
                    if not (hub.lfs_dir / value["oid"]).is_file():
                        return self._error(400, f"LFS object {value['oid']} of {value['path']} was never uploaded")
                    files[value["path"]] = LfsRef(value["oid"], int(value["size"]))
                elif key == "deletedFile":
                    files.pop(value["path"], None)
                elif key == "deletedFolder":
                    prefix = value["path"].rstrip("/") + "/"
                    files = {p: b for p, b in files.items() if not p.startswith(prefix)}
                else:
                    return self._error(400, f"fake hub supports regular files only, got a {key!r} line")
            oid = hashlib.sha1(f"{parent}-{message}-{len(repo.commits)}".encode()).hexdigest()
            repo.commits[oid] = {"files": files, "parent": parent, "message": message}
            repo.branches[rev] = oid
        self._send(200, {"commitUrl": f"{hub.url}/{repo.repo_id}/commit/{oid}", "commitOid": oid,
                         "pullRequestUrl": None})

    def _resolve(self, repo_id: str, rev: str, filename: str, *, head: bool) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, f"Repository {repo_id} not found", "RepoNotFound")
        oid = repo.resolve(rev)
        if oid is None:
            return self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        data = repo.commits[oid]["files"].get(filename)
        data = data.read(self.hub) if isinstance(data, LfsRef) else data
        if data is None:
            return self._error(404, f"Entry {filename} not found", "EntryNotFound")
        headers = {"X-Repo-Commit": oid, "ETag": f'"{_git_sha1(data)}"', "Content-Type": "application/octet-stream"}
        self._send(200, data=data, headers=headers, head=head)

    # ------------------------------------------------------------------ large files (LFS)
    def _lfs_batch(self, payload: dict) -> None:
        """Upload actions for each object: basic (one PUT) or, over ``lfs_chunk`` bytes, multipart
        (a PUT per part, then the completion request); none for an object already stored."""
        hub, chunk = self.hub, self.hub.lfs_chunk
        objects = []
        for obj in payload["objects"]:
            oid, size = obj["oid"], int(obj["size"])
            entry = {"oid": oid, "size": size}
            if not (hub.lfs_dir / oid).is_file():
                if chunk and size > chunk:
                    header = {"chunk_size": str(chunk), **{str(n): f"{hub.url}/lfs/{oid}/part/{n}"
                                                           for n in range(1, -(-size // chunk) + 1)}}
                    entry["actions"] = {"upload": {"href": f"{hub.url}/lfs/{oid}/complete", "header": header}}
                else:
                    entry["actions"] = {"upload": {"href": f"{hub.url}/lfs/{oid}"}}
            objects.append(entry)
        self._send(200, {"transfer": "multipart" if chunk else "basic", "objects": objects})

    def _lfs_complete(self, oid: str, payload: dict) -> None:
        """Join the uploaded parts (in ``partNumber`` order) into the object."""
        numbers = sorted(int(p["partNumber"]) for p in payload["parts"])
        self._store_lfs(oid, [self.hub.lfs_dir / f"{oid}.part{n}" for n in numbers])

    def _store_lfs(self, oid: str, pieces: list[Path]) -> None:
        """Concatenate ``pieces`` into ``lfs_dir/oid`` if their sha256 is ``oid``; 400 otherwise."""
        target = self.hub.lfs_dir / f"{oid}.joined"
        h = hashlib.sha256()
        with open(target, "wb") as out:
            for piece in pieces:
                with open(piece, "rb") as f:
                    while block := f.read(1 << 20):
                        h.update(block)
                        out.write(block)
                piece.unlink()
        if h.hexdigest() != oid:
            target.unlink()
            return self._error(400, f"LFS object {oid}: the uploaded bytes hash to {h.hexdigest()}")
        os.replace(target, self.hub.lfs_dir / oid)
        self._send(200, {})
