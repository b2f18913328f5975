"""Reading and writing user data outside scene files: cameras (``depthpe.io.cameras``)."""
