#!/usr/bin/env bash
# Starts a one-node Slurm cluster for the tests (munged, slurmctld, slurmd) from slurm.conf.in,
# without systemd. Usage: `eval "$(.ci/slurm/start.sh)"` — it prints `export SLURM_CONF=...`
# on standard output (everything else goes to standard error). Stop it with .ci/slurm/stop.sh,
# which kills the daemons by the PIDs recorded here.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${PDSWEEP_SLURM_DIR:-/var/tmp/pdsweep-slurm}"
for cmd in munged slurmctld slurmd sbatch sinfo; do
    command -v "$cmd" >/dev/null || { echo "start.sh: \`$cmd\` not found (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
"$here/stop.sh" >&2 || true # a cluster left over from an earlier run
rm -rf "$dir/state" "$dir/spool"
mkdir -p "$dir/state" "$dir/spool"
host="$(hostname -s)"
cpus="$(nproc)"
mem_mb="$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)"
sed -e "s|@HOST@|$host|g" -e "s|@CPUS@|$cpus|g" -e "s|@MEM_MB@|$mem_mb|g" -e "s|@DIR@|$dir|g" \
    -e "s|@CTLD_PORT@|${PDSWEEP_SLURMCTLD_PORT:-6817}|g" -e "s|@D_PORT@|${PDSWEEP_SLURMD_PORT:-6818}|g" \
    "$here/slurm.conf.in" > "$dir/slurm.conf"
export SLURM_CONF="$dir/slurm.conf"

# munged: reuse one that answers, else start our own (and remember to stop it).
if ! munge -n </dev/null >/dev/null 2>&1; then
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 600 /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    runuser -u munge -- munged
    for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
    cat /run/munge/munged.pid > "$dir/munged.pid"
fi
munge -n </dev/null | unmunge >/dev/null || { echo "start.sh: munge does not work" >&2; exit 1; }

slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 150); do
    state="$(sinfo -h -N -o '%t' 2>/dev/null | head -n1 || true)"
    case "$state" in idle|mix|alloc) break ;; esac
    sleep 0.2
done
case "$state" in
    idle|mix|alloc) ;;
    *) echo "start.sh: the node did not come up (state \`$state\`); logs in $dir" >&2
       tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
       exit 1 ;;
esac
echo "slurm: node $host up with $cpus CPUs (config $SLURM_CONF)" >&2
echo "export SLURM_CONF=$SLURM_CONF"
