#!/usr/bin/env bash
# Stops the daemons started by start.sh, by the PIDs they recorded (never by name).
dir="${PDSWEEP_SLURM_DIR:-/var/tmp/pdsweep-slurm}"
for name in slurmd slurmctld munged; do
    file="$dir/$name.pid"
    [ -s "$file" ] || continue
    pid="$(cat "$file")"
    if kill "$pid" 2>/dev/null; then
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        echo "stopped $name ($pid)"
    fi
    rm -f "$file"
done
