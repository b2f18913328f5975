"""The CPU mini-study of every preset encoding (``study.sh``; results in docs/results.md)."""
