"""Slurm client and the partitions and accounts the config asks for (`bat doctor`).

Reads PATH, `sinfo` (partitions), `sacctmgr` (the user's accounts) and the config's `orchestrate.resources`; writes
nothing. Every Slurm program the driver, submitit and the container relay call must answer: `sbatch squeue sinfo
sacct scontrol`.
"""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

from bat.doctor.finding import Finding, last_line, ok, problem, run_command, unused

if TYPE_CHECKING:
    from bat.config.root import BatConfig

CLIENT = ("sbatch", "squeue", "sinfo", "sacct", "scontrol")
"""The Slurm commands a run uses: the driver queues (sbatch), submitit watches (squeue, sacct) and requeues
(scontrol), the route and doctor read partitions (sinfo)."""


def wanted(config: BatConfig, field: str) -> dict[str, list[str]]:
    """Value -> phases of a Slurm setting across `orchestrate.resources`: `partition`, or an `additional` sbatch
    option such as `account`."""
    found: dict[str, list[str]] = {}
    for phase, res in sorted(config.orchestrate.resources.items()):
        value = res.partition if field == "partition" else res.additional.get(field)
        if value:
            found.setdefault(str(value), []).append(phase)
    return found


def parse_partitions(sinfo_output: str) -> set[str]:
    """Partition names from `sinfo -h -o %P` (the default partition carries a trailing `*`)."""
    return {line.strip().rstrip("*") for line in sinfo_output.splitlines() if line.strip()}


def check_slurm(config: BatConfig, uses_slurm: bool) -> list[Finding]:
    """The client programs, then the configured partitions and accounts; `unused` findings for a local run."""
    if not uses_slurm:
        return [unused("slurm client", f"orchestrate.executor {config.orchestrate.executor}: no Slurm job is queued")]
    missing = [name for name in CLIENT if run_command([name, "--version"]) is None]
    if missing:
        asked = sorted(wanted(config, "partition"))
        unchecked = f"; partitions {', '.join(asked)} not checked" if asked else ""
        return [
            problem(
                "slurm client",
                f"not on PATH: {' '.join(missing)}{unchecked}",
                "run on a login or compute node of the cluster (or `module load slurm`); the driver and the phases "
                "need sbatch, squeue, sinfo, sacct and scontrol",
            )
        ]
    version = run_command(["sinfo", "--version"])
    findings = [ok("slurm client", f"{version.output if version else '?'}; {' '.join(CLIENT)} on PATH")]
    findings.append(_partitions(config))
    findings.append(_accounts(config))
    return findings


def _partitions(config: BatConfig) -> Finding:
    asked = wanted(config, "partition")
    if not asked:
        return ok("slurm partitions", "no partition set: every job goes to the cluster's default partition")
    ran = run_command(["sinfo", "-h", "-o", "%P"])
    if ran is None or ran.code != 0:
        why = last_line(ran.output) if ran else "sinfo not on PATH"
        return problem("slurm partitions", f"sinfo -h -o %P failed: {why}", "check that slurmctld answers (`sinfo`)")
    have = parse_partitions(ran.output)
    absent = {name: phases for name, phases in asked.items() if name not in have}
    if absent:
        listed = "; ".join(f"{name} (resources: {', '.join(phases)})" for name, phases in sorted(absent.items()))
        return problem(
            "slurm partitions",
            f"not on this cluster: {listed}",
            f"set orchestrate.resources.<phase>.partition to one of {sorted(have)}",
        )
    return ok("slurm partitions", f"{', '.join(sorted(asked))} exist")


def _accounts(config: BatConfig) -> Finding:
    asked = wanted(config, "account")
    if not asked:
        return ok("slurm accounts", "no account set (orchestrate.resources.<phase>.additional.account): your default")
    user = getpass.getuser()
    ran = run_command(["sacctmgr", "-n", "-P", "show", "associations", f"user={user}", "format=account"])
    if ran is None or ran.code != 0:
        why = last_line(ran.output) if ran else "sacctmgr not on PATH"
        return problem(
            "slurm accounts",
            f"cannot list {user}'s accounts: {why}",
            "ask your site which accounts you may charge (`sacctmgr show assoc user=$USER`)",
        )
    have = {line.strip() for line in ran.output.splitlines() if line.strip()}
    absent = sorted(name for name in asked if name not in have)
    if absent:
        return problem(
            "slurm accounts",
            f"{user} has no association with {', '.join(absent)}",
            f"set orchestrate.resources.<phase>.additional.account to one of {sorted(have)}",
        )
    return ok("slurm accounts", f"{user} may charge {', '.join(sorted(asked))}")
