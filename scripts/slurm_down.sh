#!/usr/bin/env bash
# Stop the single-node Slurm cluster started by scripts/slurm_up.sh: slurmd, slurmctld, slurmdbd,
# mariadbd, munged, each by the pid in its pid file (never by name). Idempotent.
# `--purge` also deletes $BAT_SLURM_DIR (configs, job state, accounting DB) and the /etc/slurm links.
set -euo pipefail
DIR=${BAT_SLURM_DIR:-/var/lib/bat-slurm}
log() { printf '[slurm_down] %s\n' "$*" >&2; }

stop_pidfile() {  # name pidfile
  local name=$1 file=$2 pid
  [ -s "$file" ] || { log "$name: not running (no pid file)"; return 0; }
  pid=$(cat "$file")
  if ! kill -0 "$pid" 2>/dev/null; then log "$name: not running (stale pid $pid)"; rm -f "$file"; return 0; fi
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then log "$name: pid $pid ignored SIGTERM, sending SIGKILL"; kill -KILL "$pid"; fi
  rm -f "$file"
  log "$name: stopped (pid $pid)"
}

stop_pidfile slurmd "$DIR/run/slurmd.pid"
stop_pidfile slurmctld "$DIR/run/slurmctld.pid"
stop_pidfile slurmdbd "$DIR/run/slurmdbd.pid"
stop_pidfile mariadbd /run/mysqld/bat-mariadbd.pid
stop_pidfile munged /run/munge/munged.pid

if [ "${1:-}" = "--purge" ]; then
  for f in slurm.conf slurmdbd.conf; do [ -L "/etc/slurm/$f" ] && rm -f "/etc/slurm/$f"; done
  rm -rf "$DIR"
  log "purged $DIR"
fi
