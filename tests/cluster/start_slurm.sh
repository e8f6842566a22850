#!/usr/bin/env bash
# Start a real single-node SLURM cluster on localhost (slurmctld + slurmd, munge auth, no accounting) for the SLURM
# integration tests, inside the network namespace $SLURM_TEST_NETNS (default pipeline-slurm) whose only
# interface is loopback: clients (sbatch, squeue) must run in it (`nsenter --net=/run/netns/pipeline-slurm ...`), and so does
# every job, with no network. It changes the host, so it runs only with PIPELINE_HOST_TESTS=1 (CI sets it) and as
# root: installs Debian's slurm-wlm and munge with apt when missing, writes /etc/slurm/slurm.conf and gres.conf only where
# there are none or it wrote them before (an existing SLURM configuration is never touched), creates a munge key only where there
# is none, and records the daemons it starts in $STATE/started for stop_slurm.sh. A running cluster of its own is left
# as it is. Prints the partition name.
set -euo pipefail
if [ "${PIPELINE_HOST_TESTS:-}" != 1 ]; then
  echo "start_slurm.sh changes the host (apt, /etc/slurm, munge, daemons); set PIPELINE_HOST_TESTS=1 to allow it." >&2
  exit 2
fi
marker="# Written by tests/cluster/start_slurm.sh (the pipeline's SLURM test); stop_slurm.sh stops its daemons."
conf=/etc/slurm/slurm.conf
gres=/etc/slurm/gres.conf
for file in "$conf" "$gres"; do
  if [ -e "$file" ] && [ "$(head -n1 "$file")" != "$marker" ]; then
    echo "$file exists and was not written by this test; it is left untouched (run the SLURM test on a machine without a SLURM installation)." >&2
    exit 3
  fi
done
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get -o DPkg::Lock::Timeout=900 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq slurm-wlm munge >/dev/null
fi
netns="${SLURM_TEST_NETNS:-pipeline-slurm}"
state=/var/spool/slurm-localhost
started="$state/started"
mkdir -p /etc/slurm "$state/ctld" "$state/d" /var/log/slurm /run/munge
touch "$started"
if [ ! -e "/run/netns/$netns" ]; then
  ip netns add "$netns"
  echo "netns $netns" >> "$started"
fi
ip -n "$netns" link set lo up
# Slurm binds with getaddrinfo(AI_ADDRCONFIG), which needs one non-loopback IPv4 address: a private one on lo,
# which reaches nothing outside the namespace.
ip -n "$netns" -o addr show dev lo | grep -q "10.254.0.1/32" || ip -n "$netns" addr add 10.254.0.1/32 dev lo
host=$(hostname -s)
cpus=$(nproc)
memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
chown -R slurm:slurm "$state/ctld" "$state/d" /var/log/slurm
cat > "$conf" <<CONF
$marker
ClusterName=localhost
SlurmctldHost=${host}(127.0.0.1)
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
GresTypes=gpu
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
MinJobAge=300
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${memory} Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
# One GPU whose device file is /dev/null: SLURM grants --gpus=1 (a GPU site's jobs, its preflight among them) and sets
# CUDA_VISIBLE_DEVICES, and the job's JAX finds no GPU, as on a GPU node whose jaxlib is CPU-only.
printf '%s\nName=gpu File=/dev/null\n' "$marker" > "$gres"
if ! pgrep -x munged >/dev/null; then
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  fi
  chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged --force </dev/null >/dev/null 2>&1
  echo "munged $(pgrep -n -x munged)" >> "$started"
fi
in_netns() { nsenter --net="/run/netns/$netns" "$@"; }  # only the network namespace (ip netns exec would remount /sys without cgroups)
if ! pgrep -x slurmctld >/dev/null; then
  rm -f /run/slurmctld.pid
  in_netns /usr/sbin/slurmctld </dev/null >/dev/null 2>&1
  for _ in $(seq 30); do [ -s /run/slurmctld.pid ] && break; sleep 1; done
  echo "slurmctld $(cat /run/slurmctld.pid)" >> "$started"
fi
if ! pgrep -x slurmd >/dev/null; then
  rm -f /run/slurmd.pid
  # At niceness -10, which its jobs inherit (PropagatePrioProcess=0): they run ahead of the test processes beside
  # them, as on a cluster where a job owns its cores, so a walltime chain trains at its planned rate.
  in_netns nice -n -10 /usr/sbin/slurmd </dev/null >/dev/null 2>&1
  for _ in $(seq 30); do [ -s /run/slurmd.pid ] && break; sleep 1; done
  echo "slurmd $(cat /run/slurmd.pid)" >> "$started"
fi
for _ in $(seq 60); do
  if in_netns sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    in_netns scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true
    echo debug
    exit 0
  fi
  sleep 1
done
echo "SLURM did not come up; see /var/log/slurm/slurmctld.log and slurmd.log" >&2
exit 1
