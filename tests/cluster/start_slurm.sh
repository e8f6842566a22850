#!/usr/bin/env bash
# Start a real single-node SLURM cluster on localhost (slurmctld + slurmd, munge auth, no accounting,
# no GPUs) for the SLURM integration test. Installs Debian's slurm-wlm and munge when missing
# (needs root and apt). Idempotent: a running cluster is left as it is. Prints the partition name.
set -euo pipefail
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
host=$(hostname -s)
cpus=$(nproc)
memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
state=/var/spool/slurm-localhost
mkdir -p /etc/slurm "$state/ctld" "$state/d" /var/log/slurm /run/munge
chown -R slurm:slurm "$state" /var/log/slurm
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=localhost
SlurmctldHost=${host}
AuthType=auth/munge
CredType=cred/munge
SlurmUser=slurm
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=${state}/ctld
SlurmdSpoolDir=${state}/d
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
MinJobAge=300
NodeName=${host} CPUs=${cpus} RealMemory=${memory} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
if ! pgrep -x munged >/dev/null; then
  [ -s /etc/munge/munge.key ] || (dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null)
  chown munge:munge /etc/munge/munge.key /run/munge && chmod 400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged --force
fi
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
for _ in $(seq 60); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true
    echo debug
    exit 0
  fi
  sleep 1
done
echo "SLURM did not come up; see /var/log/slurm/slurmctld.log and slurmd.log" >&2
exit 1
