"""The docs/ pages and the architecture tables stay true to the code."""
