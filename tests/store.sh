#!/usr/bin/env bash
# store.sh BIN — the results database when the system fails, through the
# commands users run: a full disk (a 1 MiB tmpfs filled to the last byte), a
# read-only file system (a read-only bind mount), a folder without write
# permission (as the user nobody when run as root). Mounting needs root or
# CAP_SYS_ADMIN: where it is refused, those cases print SKIP and why (the unit
# tests in test_store.c cover a full and a corrupted database without mounts).
# Prints "store: N passed, N failed, N skipped".
set -u
bin=${1:-bin}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
tmp=$(mktemp -d)
mounts=()
cleanup() {
	local m
	for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0 skip=0
ok()   { pass=$((pass + 1)); }
bad()  { fail=$((fail + 1)); echo "FAIL: $*"; }
skip() { skip=$((skip + 1)); echo "store: SKIP $*"; }
cd "$root" || exit 1
S="$root/$bin/simulate" R="$root/$bin/results"
scn=tests/good/minimal.ini
runs() { sqlite3 "file:$1?immutable=1" 'SELECT count(*) FROM runs'; }

# expect NAME RC TEXT COMMAND...: exit status RC and TEXT on stderr
expect() {
	local name=$1 want_rc=$2 want=$3; shift 3
	"$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ $rc -ne "$want_rc" ]; then bad "$name: exit $rc, expected $want_rc ($(head -c 300 "$tmp/err"))"
	elif ! grep -qF -- "$want" "$tmp/err"; then bad "$name: '$(head -c 300 "$tmp/err")' lacks '$want'"
	else ok; fi
}

# ---- a path that cannot name a database: bad input, exit 2
expect "missing folder" 2 "No such file or directory" "$S" "$scn" --db "$tmp/no/such/folder/r.db"
expect "a folder" 2 "not a regular file" "$R" list --db "$tmp"

# ---- a new database and 6 processes at once, each reading it (the device's
# calibration) and then recording a run: none may meet a file without its
# schema (33 of 60 did, exit 2, before a new database appeared whole); 10 times
fails=0
for i in $(seq 10); do
	rm -f "$tmp"/new.db*
	pids=()
	for w in 1 2 3 4 5 6; do
		"$S" "$scn" --db "$tmp/new.db" >/dev/null 2>"$tmp/w$w.err" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || { fails=$((fails + 1)); cat "$tmp"/w*.err >>"$tmp/why"; }; done
	# counted through SQLite's own reader, which reads the log: writers closing
	# at once can each leave the last checkpoint to the other, so committed
	# runs may still be in new.db-wal (an immutable reader would not see them)
	n=$(sqlite3 "$tmp/new.db" 'SELECT count(*) FROM runs')
	[ "$n" = 6 ] || { fails=$((fails + 1)); echo "round $i: $n runs" >>"$tmp/why"; }
done
[ $fails -eq 0 ] && ok || bad "6 writers on a new database: $fails failures ($(head -c 300 "$tmp/why"))"

# ---- a full disk: exit 1 saying so (it was exit 2, "not a results database:
# disk I/O error"), the database intact, and usable once there is room again
full=$tmp/full
mkdir -p "$full"
if mount -t tmpfs -o size=1m shardcast-full "$full" 2>"$tmp/mount.err"; then
	mounts+=("$full")
	"$S" "$scn" --db "$full/r.db" >/dev/null || bad "full disk: the first run"
	dd if=/dev/zero of="$full/fill" bs=4k 2>/dev/null   # until the disk is full
	expect "full disk: simulate --db" 1 "the disk is full" "$S" "$scn" --db "$full/r.db"
	expect "full disk: a new database" 1 "the disk is full" "$S" "$scn" --db "$full/new.db"
	[ -z "$(ls "$full" | grep -v '^fill$\|^r\.db')" ] && ok || bad "full disk: left behind: $(ls "$full")"
	expect "full disk: results list" 1 "the disk is full" "$R" list --db "$full/r.db"
	rm -f "$full/fill"
	[ "$(runs "$full/r.db")" = 1 ] && ok || bad "full disk: runs after: $(runs "$full/r.db")"
	"$S" "$scn" --db "$full/r.db" >/dev/null 2>"$tmp/err" && [ "$(runs "$full/r.db")" = 2 ] &&
		[ "$(sqlite3 "$full/r.db" 'PRAGMA integrity_check')" = ok ] && ok ||
		bad "full disk: writing again once there is room ($(cat "$tmp/err"))"
else
	skip "full disk (mount -t tmpfs: $(head -c 120 "$tmp/mount.err"))"
fi

# ---- a read-only file system: every reader works, a writer exits 1 saying why
src=$tmp/src ro=$tmp/ro
mkdir -p "$src" "$ro"
"$S" "$scn" --db "$src/r.db" >/dev/null || bad "read-only: the first run"
if mount --bind "$src" "$ro" 2>"$tmp/mount.err" && mounts+=("$ro") &&
   mount -o remount,bind,ro "$ro" 2>"$tmp/mount.err"; then
	"$R" list --db "$ro/r.db" >"$tmp/out" 2>"$tmp/err" && grep -q "simulate" "$tmp/out" && ok ||
		bad "read-only: results list ($(cat "$tmp/err"))"
	"$R" show 1 --db "$ro/r.db" >"$tmp/out" 2>"$tmp/err" && grep -q "^id [0-9a-f-]\{36\}$" "$tmp/out" && ok ||
		bad "read-only: results show ($(cat "$tmp/err"))"
	"$R" export --csv - --db "$ro/r.db" >"$tmp/out" 2>"$tmp/err" && [ "$(wc -l <"$tmp/out")" -gt 1 ] && ok ||
		bad "read-only: results export ($(cat "$tmp/err"))"
	"$R" merge "$tmp/merged.db" "$ro/r.db" >/dev/null 2>"$tmp/err" && [ "$(runs "$tmp/merged.db")" = 1 ] && ok ||
		bad "read-only: results merge of it ($(cat "$tmp/err"))"
	"$S" "$scn" --db "$ro/r.db" --json >"$tmp/out" 2>"$tmp/err"   # reads the calibration, then writes
	rc=$?
	[ $rc -eq 1 ] && grep -qi "read-only" "$tmp/err" && ok || bad "read-only: simulate --db: exit $rc ($(cat "$tmp/err"))"
	[ -z "$(ls "$src" | grep -v '^r\.db$')" ] && ok || bad "read-only: files left beside it: $(ls "$src")"
else
	skip "read-only file system (mount --bind: $(head -c 120 "$tmp/mount.err"))"
fi

# ---- a folder without write permission (root writes anywhere: run as nobody)
chmod 755 "$tmp"
mkdir -p "$tmp/locked"
"$S" "$scn" --db "$tmp/locked/r.db" >/dev/null || bad "locked folder: the first run"
chmod 555 "$tmp/locked"
as=()
if [ "$(id -u)" = 0 ]; then
	chmod 644 "$tmp/locked/r.db"
	as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
if [ ${#as[@]} -gt 0 ] && ! "${as[@]}" "$R" --help >/dev/null 2>&1; then
	skip "folder without write permission (setpriv to nobody: the binaries are not reachable)"
else
	"${as[@]}" "$R" list --db "$tmp/locked/r.db" >"$tmp/out" 2>"$tmp/err" && grep -q simulate "$tmp/out" && ok ||
		bad "locked folder: results list ($(cat "$tmp/err"))"
fi
chmod 755 "$tmp/locked"

echo "store: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
