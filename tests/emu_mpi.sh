#!/usr/bin/env bash
# emu_mpi.sh BIN — --emulate-world against a real job: bin/emu_mpi_test under
# mpirun -np 4 (oversubscribed, so CI's two cores run it).
set -u
bin=${1:-bin}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
out=$(timeout 300 mpirun -np 4 --oversubscribe "$bin/emu_mpi_test" 2>&1)
rc=$?
echo "$out" | grep -v '^ok ' | sed 's/^/  /'
echo "$out" | grep -q '^emu-mpi (4 ranks): [0-9]* passed, 0 failed$' && [ $rc -eq 0 ] && exit 0
echo "FAIL: emu_mpi_test (exit $rc)"
exit 1
