"""bat: Benchmark-as-Teacher post-training of tool-using LLM agents on Slurm."""

__version__ = "0.1.0"
