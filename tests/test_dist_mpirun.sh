#!/usr/bin/env bash
# A real start by Open MPI's mpirun (skipped without it, exit 77): 2 and 4 processes of
# tests/dist_rank find each other from OMPI_COMM_WORLD_* alone (127.0.0.1, every rank on this
# machine), with the run's secret in a file (mpirun is not gradcache launch: no secret of its
# own), and rank 0 names the launcher. MASTER_PORT is a free port: other runs may share the
# machine. A process left behind fails the test.
set -euo pipefail
dist_rank=$(readlink -f "$1")
command -v mpirun >/dev/null || { echo "skip: no mpirun (Debian: openmpi-bin)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 32 /dev/urandom >"$work/secret"
chmod 600 "$work/secret"
root=(); [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
for n in 2 4; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    GC_DIST_SECRET_FILE="$work/secret" MASTER_PORT=$port timeout 120 \
        mpirun -n "$n" --oversubscribe "${root[@]}" -x GC_DIST_SECRET_FILE -x MASTER_PORT "$dist_rank" >"$work/out" 2>&1 ||
        { cat "$work/out"; echo "mpirun -n $n failed"; exit 1; }
    grep -q "started by Open MPI (mpirun): $n processes" "$work/out" || { cat "$work/out"; echo "rank 0 did not name Open MPI"; exit 1; }
    if pgrep -f "^$dist_rank" >/dev/null; then echo "processes of $dist_rank left behind"; exit 1; fi
done
echo "mpirun: 2 and 4 processes formed their group"
