"""The demo page (Gradio): upload images and, optionally, cameras; pick the views per prediction,
the confidence threshold and the multi-view consistency filter; get the depth maps, a 3D view of the
fused points with the cameras, and a zip of the prediction folder with its exports
(docs/predict.md#demo-depthpe-demo). ``build_app(model)`` returns the ``gr.Blocks``; ``depthpe demo`` and a
Hugging Face Space's ``app.py`` (``space.space_app``) launch it.

Every problem with the uploads or the model's input is shown as one line on the page
(``run_prediction`` never raises); nothing is sent anywhere (set ``GRADIO_ANALYTICS_ENABLED=False``
before importing gradio; ``launch`` never opens a share link).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..config import ConfigError
from ..prediction.api import load_model, predict
from ..prediction.exports import OutputSettings, write_outputs
from ..prediction.result import FusionSettings
from .uploads import UploadLimits, check_cameras_name_images, stage_cameras, stage_images

__all__ = ["DemoModel", "run_prediction", "build_app"]

TITLE = "depthpe: multi-view depth"


class DemoModel:
    """A model loaded once for the page: ``model`` (DepthModel with its ``training_inputs``),
    ``label`` (what the page names it), ``views`` (default views per prediction), ``device``."""

    def __init__(self, model, device: str = "cpu", revision: str | None = None, label: str | None = None):
        self.model, inputs = load_model(model, device, revision)
        self.model.training_inputs = inputs
        self.views = inputs.views[1] if inputs else 8
        self.device = device
        self.label = label or (str(model) if not hasattr(model, "config") else "in-memory model")


def _outputs(result, out: Path, conf: float | None, fusion_views: int):
    """Write the prediction folder with its exports; returns (summary, glb path or None)."""
    from ..prediction.files import read_ply
    from .scene3d import write_scene_glb

    fusion = FusionSettings(fusion_views) if fusion_views > 0 else None
    exports = ("colmap", "nerfstudio") if result.unit == "cameras" else ()
    # with the consistency filter on, the zip also holds each view's filtered depth (predict --filtered-depth)
    summary = write_outputs(result, out, OutputSettings(conf, fusion, filtered_depth=fusion is not None,
                                                        exports=exports))
    if not (out / "points.ply").is_file():
        return summary, None
    points, colors = read_ply(out / "points.ply")
    cams = [(fr.K, fr.w2c, *fr.depth.shape) for fr in result.frames]
    return summary, write_scene_glb(out.parent / "scene.glb", points, colors, cams)


def _message(result, summary) -> str:
    unit = "the cameras' unit" if result.unit == "cameras" else "relative depth (no cameras)"
    h, w = result.size
    lines = [f"Predicted {len(result.frames)} image(s) at {w}x{h}, {result.views_per_prediction} views per "
             f"prediction; depth in {unit}; {summary['points']} points."]
    lines += [f"- {note}" for note in result.notes]
    if summary["exports"]:
        lines.append(f"The zip holds the depth maps, points.ply and the exports: {', '.join(summary['exports'])}.")
    return "\n".join(lines)


def _without_folders(text: str, work: Path) -> str:
    """``text`` with the server's folders of this request removed (file names stay)."""
    for sub in ("images", "cameras", ""):
        text = text.replace(f"{work / sub}{os.sep}".replace(f"{os.sep}{os.sep}", os.sep), "")
    return text


def run_prediction(demo: DemoModel, images, cameras, views: int, conf_threshold: float, fusion_views: int,
                   limits: UploadLimits, work_root: Path):
    """One request of the page -> (message markdown, [(depth colour PNG, name)], GLB or None, zip or
    None). images / cameras: lists of uploaded file paths (cameras may be empty). Never raises: any
    problem becomes the message."""
    work = Path(tempfile.mkdtemp(prefix="run-", dir=work_root))
    try:
        folder = stage_images(images, work, limits)
        source = stage_cameras(cameras, work, limits)
        cams = None
        if source is not None:
            from ..scenes.cameras import read_cameras

            cams = read_cameras(source)
            check_cameras_name_images(cams, sorted(p.name for p in folder.iterdir()))
        result = predict(demo.model, folder, cams, max_views=int(views), device=demo.device)
        out = work / "prediction"
        summary, glb = _outputs(result, out, conf_threshold or None, int(fusion_views))
        archive = shutil.make_archive(str(work / "prediction"), "zip", root_dir=out)
        gallery = [(str(out / f"{f['stem']}_depth_color.png"), f["name"]) for f in summary["frames"]]
        return _message(result, summary), gallery, None if glb is None else str(glb), archive
    except ConfigError as err:
        return f"**Error:** {_without_folders(str(err), work)}", [], None, None
    except Exception as err:  # noqa: BLE001 - the page shows one line, never a traceback
        first = str(err).splitlines()[0] if str(err) else ""
        return f"**Error:** the prediction failed ({type(err).__name__}: {first})", [], None, None


def build_app(model, *, device: str = "cpu", revision: str | None = None, limits: UploadLimits | None = None):
    """The ``gr.Blocks`` of the demo for ``model`` (an exported folder, a Hub id or a DepthModel)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    import gradio as gr

    demo = DemoModel(model, device, revision)
    limits = limits or UploadLimits()
    work_root = Path(tempfile.mkdtemp(prefix="depthpe-demo-"))

    def run(images, cameras, views, conf, fusion_views):
        return run_prediction(demo, images, cameras, views, conf, fusion_views, limits, work_root)

    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=(3600, 3600)) as blocks:
        gr.Markdown(f"# {TITLE}\nModel: `{demo.label}`. Upload images (JPEG or PNG, at most {limits.max_images}, "
                    f"{limits.max_mb:g} MB each) and, optionally, their cameras: a COLMAP model (cameras and "
                    "images .txt or .bin), a transforms.json or a depthpe cameras .json.")
        with gr.Row():
            with gr.Column():
                images = gr.File(label="Images", file_count="multiple", elem_id="images")
                cameras = gr.File(label="Cameras (optional)", file_count="multiple", elem_id="cameras")
                views = gr.Slider(1, max(demo.views, 2) * 2, value=demo.views, step=1, label="Views per prediction")
                conf = gr.Number(value=0, label="Confidence threshold (0: keep all)", minimum=0)
                fusion = gr.Slider(0, 4, value=1, step=1, label="Views that must agree (multi-view consistency, "
                                                                 "0: off)")
                button = gr.Button("Predict", variant="primary", elem_id="predict")
            with gr.Column():
                message = gr.Markdown(elem_id="message")
                gallery = gr.Gallery(label="Depth", columns=2, object_fit="contain", elem_id="depth")
                view3d = gr.Model3D(label="Points and cameras", elem_id="view3d")
                archive = gr.File(label="Prediction folder (zip)", elem_id="zip")
        button.click(run, [images, cameras, views, conf, fusion], [message, gallery, view3d, archive],
                     api_name="predict")
    return blocks


def launch(blocks, host: str = "127.0.0.1", port: int | None = None, block: bool = True, max_mb: float = 20.0):
    """Serve the page on ``host:port`` (no share link, no browser opened); returns gradio's
    (app, local url, share url). ``block``: wait until interrupted. Gradio itself refuses files over
    4 x ``max_mb``; ``UploadLimits`` refuses those over ``max_mb`` with a line on the page."""
    from gradio.themes import Default

    theme = Default(font=["ui-sans-serif", "system-ui", "sans-serif"],  # no web fonts: works offline
                    font_mono=["ui-monospace", "monospace"])
    return blocks.launch(server_name=host, server_port=port, share=False, inbrowser=False,
                         prevent_thread_lock=not block, quiet=True, theme=theme, max_file_size=f"{4 * max_mb:g}mb",
                         footer_links=[])
