"""End-to-end runs in fresh processes (distributed launches, Slurm, a study)."""
