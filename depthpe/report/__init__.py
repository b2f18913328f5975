"""Self-contained HTML reports (one file, images embedded, no network): ``report.html`` of
``depthpe eval`` (``eval_report``) and of ``depthpe compare`` (``compare_report``). The pages are
Jinja2 templates (templates/); ``html`` holds what they share."""
