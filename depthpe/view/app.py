"""The viewer: a viser server showing a ``ViewScene`` in the browser (the ``view`` extra).

viser (the library VGGT's own demo viewer uses) serves a three.js client from the Python process
over one websocket, with GUI controls whose callbacks run here; it needs no browser or display on
the server and loads nothing from the network. This module only wires its controls to the pure
functions of ``depthpe.view.scene``.

Only pages served by this viewer may connect: a browser tab of another site could otherwise open
``ws://127.0.0.1:PORT`` and read the scene or press "save". viser has no option for that, so the
viewer registers a first connect callback on viser's websocket server that closes, before anything
is sent, every connection whose ``Origin`` header is not this server's own address (a connection
without one, i.e. not from a browser, is allowed: a local program could read the files anyway).
It reads viser's private ``_websock_server`` and ``_live_connections``; tests/view/test_view_origin.py
fails if a viser release renames them. A busy ``--port`` is an error, never a silent move to
another port (viser tries the next ones).

Scene conventions: OpenCV world (y down), so the viewer's up direction is -y; one frustum per view
at its camera with its image; points as ``select_points`` makes them.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from .scene import ALIGNMENTS, COLORINGS, SOURCES, PointSet, Selection, ViewScene, camera_pose, frustum_fov, \
    select_points, side_offset

__all__ = ["Viewer", "scene_extent", "origin_allowed"]

METRIC_COLUMNS = ("abs_rel", "delta1", "rmse")


def scene_extent(scene: ViewScene) -> float:
    """A length for sizing points and frustums: the 5-95 percentile spread (largest axis) of the
    GT points, else of the predicted ones; 1 without points."""
    kind = "gt" if scene.has_gt else "prediction"
    pts = np.concatenate([w[(f.gt if scene.has_gt else f.depth) > 0]
                          for w, f in zip(scene.world_points(kind), scene.frames)])
    if len(pts) < 2:
        return 1.0
    lo, hi = np.percentile(pts, [5, 95], axis=0)
    return float(max((hi - lo).max(), 1e-6))


class Viewer:
    """A running viewer of ``scene`` at http://host:port (``url``). The controls: confidence
    threshold, per-view toggles, point size, show (prediction / GT / both) and colour by (image /
    depth / error) with GT, alignment row, and a button that writes the filtered cloud to ``save_path``."""

    def __init__(self, scene: ViewScene, *, host: str = "127.0.0.1", port: int = 8080, max_points: int = 300_000,
                 conf_threshold: float | None = None, save_path: str | Path = "points_filtered.ply"):
        import viser

        self.scene, self.max_points, self.save_path = scene, max_points, Path(save_path)
        self._lock = threading.Lock()
        self.server = viser.ViserServer(host=host, port=port, label="depthpe view", verbose=False)
        if port and self.server.get_port() != port:
            self.server.stop()
            raise OSError(98, f"port {port} is busy")
        self.refused_origins: list[str] = []
        self._guard_origin(host, self.server.get_port())
        self.server.scene.set_up_direction("-y")
        self._extent = scene_extent(scene)
        self._frustums = self._add_cameras()
        self._controls = self._add_controls(conf_threshold)
        self.last: PointSet | None = None
        self.refresh()

    def _guard_origin(self, host: str, port: int) -> None:
        """Close every websocket connection whose Origin is not this server's (module docstring)."""
        websock = self.server._websock_server

        async def refuse_foreign(client) -> None:
            connection = websock._live_connections.get(client.client_id)
            if connection is None:
                return
            headers = connection.request.headers
            origins, hosts = headers.get_all("Origin"), headers.get_all("Host")
            origin = origins[0] if len(origins) == 1 else ",".join(origins)
            if origins and not (len(origins) == len(hosts) == 1 and origin_allowed(origin, hosts[0], host, port)):
                self.refused_origins.append(origin)
                await connection.close(1008, "depthpe view accepts only its own page")

        websock._client_connect_cb.insert(0, refuse_foreign)

    @property
    def url(self) -> str:
        host = self.server.get_host()
        return f"http://{'localhost' if host in ('0.0.0.0', '::') else host}:{self.server.get_port()}"

    def _add_cameras(self) -> list:
        """One frustum per view, its image inside; the browser starts behind the first camera."""
        import viser.transforms as tf

        handles = []
        for i, frame in enumerate(self.scene.frames):
            R, centre = camera_pose(frame.w2c)
            h, w = frame.depth.shape
            handles.append(self.server.scene.add_camera_frustum(
                f"/cameras/{i}", fov=frustum_fov(frame.K, h), aspect=w / h, scale=0.08 * self._extent,
                image=frame.image, wxyz=tf.SO3.from_matrix(R).wxyz, position=centre, color=(230, 120, 20),
                thickness=0.004 * self._extent))
        R0, c0 = camera_pose(self.scene.frames[0].w2c)
        # behind the first camera; with GT (side by side) further back, between the two clouds
        shift, back = (side_offset(self.scene) / 2, 1.6) if self.scene.has_gt else (np.zeros(3), 0.6)
        self.server.initial_camera.position = c0 + shift - R0[:, 2] * back * self._extent - R0[:, 1] * 0.2 * self._extent
        self.server.initial_camera.look_at = c0 + shift + R0[:, 2] * 0.5 * self._extent
        self.server.initial_camera.up = -R0[:, 1]
        return handles

    def _add_controls(self, conf_threshold: float | None) -> dict:
        """The GUI; every control calls ``refresh`` when it changes."""
        gui, scene = self.server.gui, self.scene
        c = {"title": gui.add_markdown(f"**{scene.title}**  \ndepth unit: {scene.unit}"),
             "status": gui.add_markdown("points shown: 0")}
        lo, hi = scene.conf_range()
        start = lo if conf_threshold is None else float(np.clip(conf_threshold, lo, hi))
        c["conf"] = gui.add_slider("confidence ≥", min=lo, max=max(hi, lo + 1e-3), step=max((hi - lo) / 100, 1e-4),
                                   initial_value=start, disabled=not scene.has_conf)
        size = float(f"{0.008 * self._extent:.2g}")  # two significant digits: readable slider
        c["size"] = gui.add_slider("point size", min=size / 10, max=size * 5, step=size / 10, initial_value=size)
        if scene.has_gt:
            c["source"] = gui.add_dropdown("show", SOURCES, initial_value="side by side")
            c["coloring"] = gui.add_dropdown("colour by", COLORINGS, initial_value="image")
            c["alignment"] = gui.add_dropdown("alignment", tuple(a for a in ALIGNMENTS if a in scene.scales))
        else:
            c["coloring"] = gui.add_dropdown("colour by", tuple(k for k in COLORINGS if k != "error"))
        with gui.add_folder("views"):
            c["views"] = [gui.add_checkbox(frame.name, initial_value=True) for frame in scene.frames]
        c["save"] = gui.add_button("save PLY (filtered points)")
        c["saved"] = gui.add_markdown("")
        if scene.metrics:
            c["metrics"] = gui.add_markdown(metrics_markdown(scene.metrics))
        for handle in [c[k] for k in ("conf", "size", "source", "coloring", "alignment") if k in c] + c["views"]:
            handle.on_update(lambda _event: self.refresh())
        c["save"].on_click(lambda _event: self.save())
        return c

    def selection(self, max_points: int | None = None) -> Selection:
        """The ``Selection`` the controls show now (``max_points`` overrides the budget)."""
        c = self._controls
        return Selection(
            conf_threshold=float(c["conf"].value) if self.scene.has_conf else None,
            views=tuple(bool(box.value) for box in c["views"]),
            source=c["source"].value if "source" in c else "prediction",
            coloring=c["coloring"].value, alignment=c["alignment"].value if "alignment" in c else "native",
            max_points=self.max_points if max_points is None else max_points)

    def refresh(self) -> PointSet:
        """Redraw the points for the current controls and say how many are shown."""
        with self._lock:
            points = select_points(self.scene, self.selection())
            self.server.scene.add_point_cloud("/points", points=points.points, colors=points.colors,
                                              point_size=float(self._controls["size"].value), precision="float32")
            for box, frustum in zip(self._controls["views"], self._frustums):
                frustum.visible = bool(box.value)
            budget = f"budget {self.max_points}" if self.max_points else "no budget"
            self._controls["status"].content = f"points shown: {points.shown} of {points.total} ({budget})"
            self.last = points
            return points

    def save(self) -> Path:
        """Write every point that passes the current filters (no subsampling) to ``save_path``."""
        from ..prediction.files import write_ply

        points = select_points(self.scene, self.selection(max_points=0))
        write_ply(self.save_path, points.points, points.colors)
        self._controls["saved"].content = f"saved {points.total} points to {self.save_path}"
        print(f"saved {points.total} points to {self.save_path}", flush=True)
        return self.save_path

    def stop(self) -> None:
        self.server.stop()


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def origin_allowed(origin: str, host_header: str, bound_host: str, port: int) -> bool:
    """Whether a websocket request comes from a page this viewer served: its ``Origin`` is
    ``http://`` + its ``Host`` header, that port is the server's, and the host name is a loopback
    name or the bound host (any name when bound to all interfaces, 0.0.0.0 or ::). The host-name rule
    stops DNS rebinding (a foreign name resolved to 127.0.0.1 has a matching Origin and Host)."""
    if origin != f"http://{host_header}":
        return False
    name, _, host_port = host_header.rpartition(":")
    if host_port != str(port):
        return False
    return bound_host in ("0.0.0.0", "::") or name in (*LOOPBACK_NAMES, bound_host)


def metrics_markdown(metrics: dict[str, dict], columns=METRIC_COLUMNS) -> str:
    """A Markdown table of a scene's metrics: one line per alignment row."""
    lines = ["| row | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for row, values in metrics.items():
        lines.append(f"| {row} | " + " | ".join(f"{float(values[k]):.4f}" for k in columns) + " |")
    return "**scene metrics**\n\n" + "\n".join(lines)
