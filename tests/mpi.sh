#!/usr/bin/env bash
# mpi.sh BIN — the runtime's strategies under mpirun: bin/rt_mpi_test with 4
# ranks (and 2, where hybrid sharding degenerates to one group), oversubscribed
# so CI's two cores run them. Prints "mpi: N passed, N failed".
set -u
bin=${1:-bin}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root" || exit 1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# containers often forbid the cross-memory-attach single copy of Open MPI's shared memory
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
pass=0 fail=0
for np in 4 2; do
	out=$(timeout 300 mpirun -np $np --oversubscribe "$bin/rt_mpi_test" 2>&1)
	rc=$?
	echo "$out" | grep -v '^ok ' | sed 's/^/  /'
	p=$(echo "$out" | sed -n 's/^mpi ([0-9]* ranks): \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
	f=$(echo "$out" | sed -n 's/^mpi ([0-9]* ranks): \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
	if [ -z "$p" ]; then echo "FAIL: mpirun -np $np exited $rc without a summary"; fail=$((fail + 1)); continue; fi
	pass=$((pass + p)); fail=$((fail + f))
	[ $rc -eq 0 ] || [ "$f" -gt 0 ] || { echo "FAIL: mpirun -np $np exited $rc"; fail=$((fail + 1)); }
done
echo "mpi: $pass passed, $fail failed"
[ $fail -eq 0 ]
