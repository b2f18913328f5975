#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, to try the scripts of scripts/slurm/ before a real cluster
# (docs/distributed.md, "Slurm"). Root, Debian/Ubuntu, no systemd needed.
#
#   scripts/slurm/local_cluster.sh start    # install the packages if missing, write the config, start the
#                                           # daemons, wait until the node is idle; prints `export SLURM_CONF=...`
#   scripts/slurm/local_cluster.sh status   # exit 0 when the daemons run and the node answers
#   scripts/slurm/local_cluster.sh stop     # stop the daemons by their PID files (never by name)
#
# Everything lives in one folder, DEPTHPE_SLURM_DIR (default /tmp/depthpe-slurm): slurm.conf, the PID
# files, logs, state and the munge socket. The clients (sbatch, srun, squeue, scontrol) find the config
# through SLURM_CONF=$DEPTHPE_SLURM_DIR/slurm.conf; jobs inherit it.
#
# The node announces DEPTHPE_SLURM_CPUS CPUs (default 16) and DEPTHPE_SLURM_MEM_MB MB (default 16384) to
# the scheduler, whatever the machine has (SlurmdParameters=config_overrides): these are what jobs may
# ask for, not limits (no cgroups here: ProctrackType=proctrack/linuxproc, TaskPlugin=task/none), so that
# several tiny jobs can run side by side on a small machine. Partitions: `main` (default, never
# pre-empted), `low` (pre-emptable: a job is requeued, after GraceTime=60 s with its --signal) and `high`
# (PriorityTier 2: pre-empts jobs of `low`).
set -euo pipefail

DIR=${DEPTHPE_SLURM_DIR:-/tmp/depthpe-slurm}
CPUS=${DEPTHPE_SLURM_CPUS:-16}
MEM=${DEPTHPE_SLURM_MEM_MB:-16384}
CONF=$DIR/slurm.conf
export SLURM_CONF=$CONF

die() { echo "local_cluster: $*" >&2; exit 1; }

install_packages() {
    local missing=()
    for tool in slurmctld slurmd sbatch munged; do
        command -v "$tool" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$tool" >/dev/null 2>&1 \
            || missing+=("$tool")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || die "Slurm is not installed (${missing[*]} missing) and installing it needs root: run as root, or apt-get install slurmctld slurmd slurm-client munge"
    command -v apt-get >/dev/null 2>&1 || die "Slurm is not installed (${missing[*]} missing) and there is no apt-get to install it"
    echo "local_cluster: installing slurmctld slurmd slurm-client munge with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge >/dev/null) || die "apt-get install slurmctld slurmd slurm-client munge failed"
}

write_config() {
    local host
    host=$(hostname -s)
    mkdir -p "$DIR"/state "$DIR"/spool "$DIR"/log "$DIR"/munge
    chmod 755 "$DIR"
    cat > "$CONF" <<EOF
# written by scripts/slurm/local_cluster.sh for host $host
ClusterName=depthpe
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=5
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
JobRequeue=1
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal
KillWait=10
MinJobAge=600
ReturnToService=2
MailProg=/bin/true
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=OFF
PartitionName=low Nodes=$host MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=60
PartitionName=high Nodes=$host MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
EOF
}

# pid_alive FILE: the PID in FILE runs and is the daemon the file is named after (munged, slurmctld,
# slurmd), not a process that got its number after the daemon ended
pid_alive() {
    local pid
    [ -s "$1" ] || return 1
    pid=$(cat "$1")
    kill -0 "$pid" 2>/dev/null && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$(basename "$1" .pid)" ]
}

start_munge() {
    pid_alive "$DIR/munged.pid" && return 0
    chown munge:munge "$DIR/munge" && chmod 755 "$DIR/munge"
    local key=/etc/munge/munge.key
    [ -s "$key" ] || die "no munge key at $key (the munge package creates it; reinstall munge)"
    # munged runs as user munge; its PID file is written by munged itself.
    su -s /bin/sh munge -c "/usr/sbin/munged --socket=$DIR/munge/munge.socket --pid-file=$DIR/munge/munged.pid \
        --log-file=$DIR/munge/munged.log --seed-file=$DIR/munge/munged.seed --key-file=$key" \
        || die "munged did not start (log: $DIR/munge/munged.log)"
    cp "$DIR/munge/munged.pid" "$DIR/munged.pid"
}

wait_idle() {
    local state=""
    for _ in $(seq 1 60); do
        state=$(sinfo -h -N -o %t 2>/dev/null | head -n 1 || true)
        case "$state" in
            idle|mix|alloc) return 0 ;;
            drain*|down*|inval*) scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true ;;
        esac
        sleep 1
    done
    die "the node did not become idle within 60 s (state '${state:-no answer}'); logs: $DIR/log/slurmctld.log, $DIR/log/slurmd.log"
}

start() {
    install_packages
    write_config
    start_munge
    # -c: a clean start (no jobs of an earlier cluster); each daemon writes its PID file.
    pid_alive "$DIR/slurmctld.pid" || /usr/sbin/slurmctld -c -f "$CONF" \
        || die "slurmctld did not start (log: $DIR/log/slurmctld.log)"
    pid_alive "$DIR/slurmd.pid" || /usr/sbin/slurmd -f "$CONF" || die "slurmd did not start (log: $DIR/log/slurmd.log)"
    wait_idle
    echo "local_cluster: node $(hostname -s) is up ($CPUS CPUs, $MEM MB for the scheduler; partitions main, low, high)"
    echo "export SLURM_CONF=$CONF"
}

stop_pid() {  # stop_pid NAME FILE: SIGTERM the PID in FILE, wait up to 20 s, then SIGKILL
    local file=$2 pid
    pid_alive "$file" || { rm -f "$file"; return 0; }
    pid=$(cat "$file")
    kill -TERM "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && { echo "local_cluster: $1 ($pid) did not stop: SIGKILL"; kill -KILL "$pid"; }
    rm -f "$file"
}

stop() {
    stop_pid slurmd "$DIR/slurmd.pid"
    stop_pid slurmctld "$DIR/slurmctld.pid"
    stop_pid munged "$DIR/munged.pid"
    echo "local_cluster: stopped"
}

status() {
    local name
    for name in munged slurmctld slurmd; do
        pid_alive "$DIR/$name.pid" || die "$name is not running (no live PID in $DIR/$name.pid): run $0 start"
    done
    sinfo -h -N -p main -o "%N %t %c CPUs %m MB" || die "slurmctld does not answer (log: $DIR/log/slurmctld.log)"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status  (folder: DEPTHPE_SLURM_DIR=$DIR)" >&2; exit 2 ;;
esac
