#!/usr/bin/env bash
# Bring up a REAL single-node Slurm cluster (Debian slurm-wlm 22.05 + munge + slurmdbd + MariaDB)
# without systemd, idempotently: installs packages if missing, writes configs into $BAT_SLURM_DIR
# (default /var/lib/bat-slurm), starts munged -> mariadbd -> slurmdbd -> slurmctld -> slurmd,
# waits until the node is idle and prints how to use it. Re-running while it is up is a no-op.
# Needs root. Stop it with scripts/slurm_down.sh. Facts behind the settings: docs in SLURM.md.
set -euo pipefail

DIR=${BAT_SLURM_DIR:-/var/lib/bat-slurm}
CLUSTER=${BAT_SLURM_CLUSTER:-bat}
CPUS=${BAT_SLURM_CPUS:-8}            # declared CPUs (config_overrides): lets a driver + phase jobs overlap on 2 cores
# job ids: a fresh cluster would restart at 1 and collide with old submitit folders; keep the first choice
FIRST_JOB_ID=${BAT_SLURM_FIRST_JOB_ID:-$(sed -n 's/^FirstJobId=//p' "$DIR/etc/slurm.conf" 2>/dev/null || true)}
FIRST_JOB_ID=${FIRST_JOB_ID:-$(( ($(date +%s) % 100000) * 10 + 1000 ))}
HOST=$(hostname -s)

log() { printf '[slurm_up] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (starts munged, mariadbd, slurmdbd, slurmctld, slurmd)"

node_ready() {
  command -v sinfo >/dev/null 2>&1 || return 1
  local state
  state=$(timeout 5 sinfo -h -n "$HOST" -o '%T' 2>/dev/null | head -n1) || return 1
  case "$state" in idle|mixed|allocated|completing) return 0 ;; *) return 1 ;; esac
}
usage_note() {
  cat <<EOF
Slurm cluster '$CLUSTER' is up on node $HOST ($CPUS CPUs declared). State/configs/logs: $DIR
  sinfo; squeue; sacct -X          # inspect
  sbatch run_round.sh              # queue a round of bat phases
  scripts/slurm_down.sh            # stop every daemon started here
EOF
}

if node_ready && timeout 5 sacct -n -X -S now-1minute >/dev/null 2>&1; then
  log "already up (node $HOST is $(sinfo -h -n "$HOST" -o %T))"; usage_note; exit 0
fi

# 1. packages -------------------------------------------------------------------------------
need=()
for pair in slurmctld:slurm-wlm slurmd:slurm-wlm munged:munge slurmdbd:slurmdbd mariadbd:mariadb-server; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${pair%%:*}" ] || need+=("${pair##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq slurm-wlm munge slurmdbd mariadb-server >/dev/null
fi
getent hosts "$HOST" >/dev/null || echo "127.0.0.1 $HOST" >> /etc/hosts

mkdir -p "$DIR"/{etc,log,run,spool/ctld,spool/d,mysql}
chmod 755 "$DIR"

# 2. munge ----------------------------------------------------------------------------------
[ -s /etc/munge/munge.key ] || { mungekey --create --force 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=128 count=1 2>/dev/null; }
chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge; chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  rm -f /run/munge/munge.socket.2.lock
  runuser -u munge -- /usr/sbin/munged --force
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
fi
munge -n | unmunge >/dev/null || die "munged does not answer"

# 3. MariaDB + slurmdbd (accounting: submitit needs sacct) ------------------------------------
DB_SOCK=/run/mysqld/mysqld.sock     # the client library's default socket: slurmdbd has no socket option
mkdir -p /run/mysqld; chown mysql:mysql /run/mysqld
if ! mariadb-admin --socket="$DB_SOCK" ping >/dev/null 2>&1; then
  chown -R mysql:mysql "$DIR/mysql"
  if [ ! -d "$DIR/mysql/mysql" ]; then
    log "initialising MariaDB in $DIR/mysql"
    mariadb-install-db --user=mysql --datadir="$DIR/mysql" --auth-root-authentication-method=socket >/dev/null
  fi
  log "starting mariadbd"
  /usr/sbin/mariadbd --user=mysql --datadir="$DIR/mysql" --socket="$DB_SOCK" --pid-file=/run/mysqld/bat-mariadbd.pid \
    --skip-networking --log-error="$DIR/log/mariadb.log" --innodb-buffer-pool-size=32M >/dev/null 2>&1 &
  for _ in $(seq 100); do mariadb-admin --socket="$DB_SOCK" ping >/dev/null 2>&1 && break; sleep 0.2; done
  mariadb-admin --socket="$DB_SOCK" ping >/dev/null 2>&1 || die "mariadbd did not start; see $DIR/log/mariadb.log"
fi
mariadb --socket="$DB_SOCK" -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'batslurm';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

cat > "$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=batslurm
EOF
chmod 600 "$DIR/etc/slurmdbd.conf"

# 4. slurm.conf -------------------------------------------------------------------------------
MEM=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
MEM=$(( MEM > 2048 ? MEM - 1024 : MEM ))
cat > "$DIR/etc/slurm.conf" <<EOF
# Written by scripts/slurm_up.sh (bat test harness): one node, accounting through slurmdbd.
ClusterName=$CLUSTER
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=5
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MailProg=/bin/true
FirstJobId=$FIRST_JOB_ID
KillWait=5
MinJobAge=600
SchedulerParameters=batch_sched_delay=0,sched_min_interval=100000,sched_interval=2,bf_interval=1
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
mkdir -p /etc/slurm
for f in slurm.conf slurmdbd.conf; do
  if [ -e "/etc/slurm/$f" ] && [ ! -L "/etc/slurm/$f" ]; then
    die "/etc/slurm/$f exists and is not ours; move it away or set up Slurm by hand"
  fi
  ln -sfn "$DIR/etc/$f" "/etc/slurm/$f"
done

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# 5. daemons ----------------------------------------------------------------------------------
if ! alive "$DIR/run/slurmdbd.pid"; then
  log "starting slurmdbd"; /usr/sbin/slurmdbd
  for _ in $(seq 50); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.2; done
fi
sacctmgr -n list cluster format=cluster 2>/dev/null | grep -qw "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
if ! alive "$DIR/run/slurmctld.pid"; then log "starting slurmctld"; /usr/sbin/slurmctld; fi
for _ in $(seq 50); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
if ! alive "$DIR/run/slurmd.pid"; then log "starting slurmd"; /usr/sbin/slurmd; fi

for _ in $(seq 100); do node_ready && break; sleep 0.2; done
node_ready || { scontrol update nodename="$HOST" state=resume 2>/dev/null || true; sleep 1; }
node_ready || die "node $HOST not idle: $(sinfo -h -N -o '%N %T %E' 2>&1); logs in $DIR/log"
for _ in $(seq 50); do sacct -n -X -S now-1minute >/dev/null 2>&1 && break; sleep 0.2; done
log "up"
usage_note
