"""The only code that builds paths under `state/<run>/`: layout, atomic io, JSONL, markers, checkpoints, leases."""
