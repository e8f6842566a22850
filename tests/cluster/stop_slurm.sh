#!/usr/bin/env bash
# Stop what start_slurm.sh started (the daemons and the network namespace it recorded in $STATE/started), by
# process id, and nothing else; remove the /etc/slurm/slurm.conf and gres.conf it wrote when it started the
# controller. Left behind, slurm.conf names a controller that no longer runs, and every later `snakemake` on this
# machine waits ~9 s at start-up: the SLURM executor plugin runs `scontrol show config` while Snakemake loads its
# plugins.
set -euo pipefail
started=/var/spool/slurm-localhost/started
[ -f "$started" ] || exit 0
while read -r name id; do
  case "$name" in
    netns) ;;
    *) if [ "$(cat /proc/"$id"/comm 2>/dev/null)" = "$name" ]; then kill "$id"; fi ;;
  esac
done < "$started"
for _ in $(seq 30); do
  alive=""
  while read -r name id; do
    if [ "$name" != netns ] && [ "$(cat /proc/"$id"/comm 2>/dev/null)" = "$name" ]; then alive=1; fi
  done < "$started"
  [ -z "$alive" ] && break
  sleep 1
done
while read -r name id; do
  if [ "$name" = netns ]; then ip netns delete "$id" 2>/dev/null || true; fi
done < "$started"
marker="# Written by tests/cluster/start_slurm.sh (the pipeline's SLURM test); stop_slurm.sh stops its daemons."
conf=/etc/slurm/slurm.conf
if grep -q "^slurmctld " "$started"; then
  for file in "$conf" /etc/slurm/gres.conf; do
    if [ -f "$file" ] && [ "$(head -n1 "$file")" = "$marker" ]; then rm -f "$file"; fi
  done
fi
rm -f "$started"
