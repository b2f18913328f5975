"""What a cluster scheduler's environment means for a depthpe process, one module per scheduler
(``slurm``: Slurm's task variables -> torch.distributed's, an array task -> a conversion shard).
Standard library only; the scripts that submit jobs are in ``scripts/slurm/`` (docs/distributed.md)."""
