"""Plain helpers shared by test modules (builders, references, fake servers); no fixtures, no tests."""
