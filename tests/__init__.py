"""Test suite; helper modules (scenes, hub_server, test_training, test_pe_support) import as ``tests.*``."""
