"""`bat doctor`: what a round needs from the machine it runs on, checked before a round fails on it.

Each check returns `Finding`s (`bat.doctor.finding`): a name, a status (`ok`, `problem`, or `unused` when the config
does not need the item), what was seen and, for a problem, what to do. The checks, one module per area:

* `bat.doctor.slurm`: the Slurm client (`sinfo`, `sbatch`, `squeue`, `sacct`, `scontrol`), the partitions and
  accounts named in `orchestrate.resources`;
* `bat.doctor.container`: Apptainer (or SingularityCE) and the image, and unprivileged user namespaces (bubblewrap
  actually started, as the tool sandbox starts it);
* `bat.doctor.gpu`: the GPUs visible (`nvidia-smi`), their memory against `orchestrate.gpu_mem_gb` and the resource
  plan's largest per-GPU need, the driver's CUDA version against torch's;
* `bat.doctor.storage`: `model.path` and `model.cache_dir` readable, the state dir and the node-local scratch
  writable with their free space;
* `bat.doctor.stack`: the installed Python packages against bat's pins.

`bat.doctor.checks.run_checks` runs them all; `bat doctor` prints them and exits 0 when none is a problem, else 2.
Nothing here writes outside a probe file it removes again.
"""
