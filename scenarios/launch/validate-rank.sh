#!/bin/sh
# validate-rank.sh DEST.db COMMAND ARGS... — what each rank of a cluster
# validation runs (validate.sbatch, validate-mpijob.yaml).
#
# Runs COMMAND ARGS --db LOCAL.db with LOCAL.db in node-local scratch, then, if
# this process wrote it (validate records the run on rank 0 only), copies it to
# DEST.db. SQLite's WAL journal needs shared memory on one host, so a results
# database must not live on NFS/Lustre while it is written; the copy is taken
# after the writer has closed it (its WAL already folded in).
set -u
if [ $# -lt 2 ]; then
	echo "usage: validate-rank.sh DEST.db COMMAND [ARGS...]" >&2
	exit 2
fi
dest=$1
shift
scratch=$(mktemp -d "${TMPDIR:-/tmp}/shardcast-validate.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
"$@" --db "$scratch/run.db"
rc=$?
if [ -s "$scratch/run.db" ]; then
	if mkdir -p "$(dirname "$dest")" && cp "$scratch/run.db" "$dest.tmp.$$" &&
	   mv -f "$dest.tmp.$$" "$dest"; then
		:
	else
		echo "validate-rank.sh: could not write $dest" >&2
		rm -f "$dest.tmp.$$"
		[ "$rc" -ne 0 ] || rc=1
	fi
fi
exit "$rc"
