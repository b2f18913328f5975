"""``depthpe demo``: a Gradio page that predicts depth for uploaded images (docs/predict.md#demo-depthpe-demo):
checking the uploads (``uploads``), the 3D view (``scene3d``), the page (``app``) and the
Hugging Face Space file that runs it (``space``)."""
