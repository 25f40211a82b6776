# The two commands of the README. Both are idempotent and install what they need.
.PHONY: demo test setup setup-cluster slurm-up slurm-down

demo:   ## set up and run the embedded default (local executor, pretrained SmolLM2-135M policy, CPU)
	scripts/demo.sh

test:   ## set up (venv, Debian packages, local Slurm) and run the whole test suite
	scripts/test.sh

setup:
	scripts/bootstrap.sh

setup-cluster:   ## a cluster login node, no root: Python >= 3.11 + pip only (scripts/setup_cluster.sh --help)
	scripts/setup_cluster.sh

slurm-up:
	scripts/slurm_up.sh

slurm-down:
	scripts/slurm_down.sh
