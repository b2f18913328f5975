"""``depthpe view`` talks only to its own page (reliability IV items 5 and 14): a websocket from a page
of another site (another Origin, or DNS rebinding) is closed before any scene data is sent, the
viewer's own page and non-browser clients are served, and a busy port is an error."""

from __future__ import annotations

import socket

import numpy as np
import pytest

viser = pytest.importorskip("viser", reason="the view extra (viser) is not installed: pip install 'depthpe[view]'")
from websockets.exceptions import ConnectionClosed  # noqa: E402 (viser brings websockets)
from websockets.sync.client import connect  # noqa: E402

from depthpe.view.app import Viewer, origin_allowed  # noqa: E402
from depthpe.view.scene import ViewFrame, ViewScene  # noqa: E402


def _scene() -> ViewScene:
    frames = [ViewFrame(name=f"v{i}", image=np.full((4, 5, 3), 80 * i, np.uint8),
                        K=np.array([[5.0, 0, 2.5], [0, 5.0, 2.0], [0, 0, 1]]),
                        w2c=np.concatenate([np.eye(3), [[-float(i)], [0.0], [0.0]]], axis=1),
                        depth=np.full((4, 5), 2.0, np.float32), conf=np.ones((4, 5), np.float32))
              for i in range(2)]
    return ViewScene(title="toy", frames=frames, scales={"native": 1.0})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def viewer(tmp_path):
    v = Viewer(_scene(), port=_free_port(), max_points=100, save_path=tmp_path / "f.ply")
    yield v
    v.stop()


def _first_frame(port: int, origin: str | None, host: str = "127.0.0.1"):
    """The first thing a websocket client gets from the viewer at 127.0.0.1:port, asking for
    ``host`` (its Host header): a message, or the ConnectionClosed."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    with connect(f"ws://{host}:{port}", sock=sock, origin=origin, open_timeout=20,
                 subprotocols=[f"viser-v{viser.__version__}"]) as ws:
        try:
            return ws.recv(timeout=20)
        except ConnectionClosed as closed:
            return closed


def test_a_page_of_another_site_gets_nothing(viewer):
    port = viewer.server.get_port()
    got = _first_frame(port, "https://evil.example")
    assert isinstance(got, ConnectionClosed) and got.rcvd is not None and got.rcvd.code == 1008
    rebinding = _first_frame(port, f"http://evil.example:{port}", host="evil.example")
    assert isinstance(rebinding, ConnectionClosed) and rebinding.rcvd.code == 1008
    assert viewer.refused_origins == ["https://evil.example", f"http://evil.example:{port}"]


def test_its_own_page_and_a_local_program_are_served(viewer):
    port = viewer.server.get_port()
    assert isinstance(_first_frame(port, f"http://127.0.0.1:{port}"), bytes)
    assert isinstance(_first_frame(port, f"http://localhost:{port}", host="localhost"), bytes)
    assert isinstance(_first_frame(port, None), bytes)  # no Origin: not a browser page
    assert viewer.refused_origins == []


def test_the_origin_rule():
    assert origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080", "127.0.0.1", 8080)
    assert not origin_allowed("http://127.0.0.1:8081", "127.0.0.1:8081", "127.0.0.1", 8080)  # another port
    assert not origin_allowed("null", "127.0.0.1:8080", "127.0.0.1", 8080)  # a sandboxed or file:// page
    assert origin_allowed("http://myhost:8080", "myhost:8080", "0.0.0.0", 8080)  # served on all interfaces


def test_a_busy_port_is_an_error_not_another_port(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(OSError, match=f"port {port} is busy"):
            Viewer(_scene(), port=port, max_points=100, save_path=tmp_path / "f.ply")


def test_depthpe_view_on_a_busy_port_or_a_missing_folder_is_one_error_line(pred_dir, tmp_path, capsys):
    from depthpe.cli import main

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["view", str(pred_dir), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: cannot serve on 127.0.0.1:{port} (port {port} is busy); pick another --port\n"
    assert main(["view", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nowhere'}: no such folder\n"
