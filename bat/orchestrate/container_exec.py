"""The host-side wrapper of a containerised phase job and the Slurm relay it serves (a bash script, kept here as
text so it ships inside the package and the image).

`write_container_exec(layout)` writes it to `layout.container_exec` (under the state dir, bound at the same path
inside the container, so the route job inside the container names the same file when it queues the next round).
The script has two roles, chosen by the name it is called under:

* `container_exec.sh SCRATCH RELAY APPTAINER exec ARGS...` (host side, the `python=` hook of submitit's sbatch
  script): passes the job's environment named in `BAT_CONTAINER_PASS_ENV` (`APPTAINERENV_*`); with RELAY=1 makes a
  relay folder on node-local SCRATCH (bound over /tmp in the container), links the relayed Slurm
  commands into its `bin/`, serves requests from that folder in the background, runs `APPTAINER exec` with
  `BAT_SLURM_RELAY` (the folder's path inside), waits for it through USR2/TERM (the phase checkpoints and requeues meanwhile) and
  removes the folder. A folder whose wrapper was killed before that (SIGKILL after Slurm's KillWait) is removed by
  the next wrapper on the same host and scratch (its `owner` file names host, pid and the pid's start time).
* `sbatch|scontrol|squeue|sacct|scancel|sinfo|srun ARGS...` (inside the container, first on PATH): writes the argv and
  working directory as a request, waits for the host side to run the same command with the host's own Slurm
  client, config and munge, and replays its stdout, stderr and exit code. stdin is not relayed.
"""

from __future__ import annotations

from bat.state.atomic import atomic_write_text
from bat.state.layout import RunLayout

RELAYED_COMMANDS = ("sbatch", "scontrol", "squeue", "sacct", "scancel", "sinfo", "srun")
"""Relayed to the host side. `srun` is there because submitit's Slurm executor refuses to start without one on
PATH; a relayed `srun` runs its command on the host, outside the container."""

SCRIPT = r"""#!/usr/bin/env bash
# Written by bat (bat/orchestrate/container_exec.py) at every container submission; edits are overwritten.
set -u
RELAYED=" __RELAYED__ "
ME=${0##*/}
SELF=$(readlink -f "$0")

serve_one() {  # run one claimed request folder with the host's Slurm client
  local dir=$1 argv=() cwd rc
  trap ':' USR2 TERM
  mapfile -d '' argv < "$dir/argv"
  cwd=$(cat "$dir/cwd")
  if [[ "$RELAYED" != *" ${argv[0]:-} "* ]]; then
    echo "bat relay: '${argv[0]:-}' is not relayed; relayed:$RELAYED" > "$dir/err"; rc=2
  else
    (cd "$cwd" 2>/dev/null || cd /; exec "${argv[@]}" </dev/null >"$dir/out" 2>"$dir/err"); rc=$?
  fi
  echo "$rc" > "$dir/rc.tmp" && mv "$dir/rc.tmp" "$dir/rc"
}

serve() {  # poll the relay folder for requests until killed
  local relay=$1 dir
  trap ':' USR2 TERM
  while :; do
    for dir in "$relay"/req.*; do
      [ -d "$dir" ] && mkdir "$dir/claimed" 2>/dev/null && serve_one "$dir" &
    done
    sleep 0.05
  done
}

started() {  # start time of process $1 in clock ticks since boot (field 22 of /proc/PID/stat), empty when gone
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }  # the command name may hold spaces: fields after its closing parenthesis
  set -- $stat
  echo "${20:-}"
}

sweep_stale() {  # remove relay folders on SCRATCH whose wrapper on this host is gone (killed before its cleanup)
  local dir host pid start
  for dir in "$1"/bat-slurm-relay.*; do
    [ -f "$dir/owner" ] || continue
    read -r host pid start < "$dir/owner" || continue
    [ "$host" = "$(hostname)" ] || continue
    [ -n "$pid" ] && [ "$(started "$pid")" = "$start" ] && continue
    rm -rf "$dir"
  done
}

host_main() {  # container_exec.sh SCRATCH RELAY(0|1) APPTAINER exec ARGS...
  local scratch=$1 relay_on=$2 app=$3 verb=$4 relay="" name var server="" child rc
  shift 4
  if [ "$relay_on" = 1 ]; then
    sweep_stale "$scratch"
    relay=$(mktemp -d "$scratch/bat-slurm-relay.XXXXXX") || { echo "container_exec: cannot write to scratch $scratch" >&2; exit 1; }
    echo "$(hostname) $$ $(started $$)" > "$relay/owner"
    mkdir "$relay/bin"
    for name in $RELAYED; do ln -s "$SELF" "$relay/bin/$name"; done
    set -- --env "BAT_SLURM_RELAY=/tmp/${relay##*/}" "$@"
  fi
  set -f  # the pass_env patterns are globs of variable names, not of file names
  for var in $(compgen -e); do
    for name in ${BAT_CONTAINER_PASS_ENV:-}; do
      # shellcheck disable=SC2053
      [[ $var == $name ]] && export "APPTAINERENV_$var=${!var}" && break
    done
  done
  set +f
  trap ':' USR2 TERM  # Slurm signals every process of the step: stay up while the phase checkpoints and requeues
  if [ -n "$relay" ]; then serve "$relay" & server=$!; fi
  "$app" "$verb" "$@" & child=$!
  while kill -0 "$child" 2>/dev/null; do wait "$child"; done  # a trapped signal interrupts `wait`: wait again
  wait "$child"; rc=$?  # bash keeps the status of a reaped background child
  if [ -n "$server" ]; then kill -KILL "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$relay"; fi
  exit "$rc"
}

shim_main() {  # inside the container: relay `$ME ARGS...` to the host side
  local relay=${BAT_SLURM_RELAY:-} tmp dir waited=0 limit=${BAT_SLURM_RELAY_TIMEOUT:-600} rc
  [ -d "$relay" ] || { echo "$ME: no Slurm relay here (BAT_SLURM_RELAY=$relay); run inside a bat container job" >&2; exit 2; }
  trap ':' USR2 TERM
  tmp=$(mktemp -d "$relay/tmp.XXXXXX") || exit 2
  printf '%s\0' "$ME" "$@" > "$tmp/argv"
  printf '%s' "$PWD" > "$tmp/cwd"
  dir=$relay/req.${tmp##*.}
  mv "$tmp" "$dir"
  # poll fast: submitit makes the job's log folder only after `sbatch` answers, and a job that starts at once
  # (an idle cluster) needs that folder for its output file
  while [ ! -e "$dir/rc" ]; do
    sleep 0.01; waited=$((waited + 1))
    if [ "$waited" -gt $((limit * 100)) ]; then echo "$ME: the host relay did not answer in ${limit}s" >&2; exit 2; fi
  done
  cat "$dir/out" 2>/dev/null; cat "$dir/err" >&2 2>/dev/null
  rc=$(cat "$dir/rc"); rm -rf "$dir"
  exit "$rc"
}

if [[ "$RELAYED" == *" $ME "* ]]; then shim_main "$@"; else host_main "$@"; fi
""".replace("__RELAYED__", " ".join(RELAYED_COMMANDS))


def write_container_exec(layout: RunLayout) -> str:
    """Write the wrapper to `layout.container_exec` (executable) unless it already holds this text; returns its
    absolute path. Reads and writes only that file."""
    path = layout.container_exec
    if not path.exists() or path.read_text(encoding="utf-8") != SCRIPT:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, SCRIPT)
    if path.stat().st_mode & 0o111 != 0o111:
        path.chmod(0o755)
    return str(path.resolve())
