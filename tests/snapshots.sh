#!/usr/bin/env bash
# snapshots.sh BIN [--update] — whole-scenario snapshots: `simulate --json` of
# every shipped scenario (scenarios/**/*.ini outside scenarios/sweeps/) and
# `recommend --json` of every shipped sweep (scenarios/sweeps/*.ini), every
# number rounded to 4 significant digits, compared with the files under
# tests/snapshots/. A model change that moves any figure by more than the
# rounding shows up here as a diff; `make snapshots` (--update) rewrites the
# files on purpose, so the change is reviewed with the commit that makes it.
#
# Layout: tests/snapshots/simulate/NAME.json (pretty JSON) and
# tests/snapshots/recommend/NAME.jsonl (the sweep's header, then one line per
# cell and one per candidate result, so a diff names the cell and candidate).
# Runs read no results database (--db points at an empty temporary one): a
# calibration stored on this machine must not change a snapshot.
set -u
bin=${1:-bin}
update=0
[ "${2:-}" = "--update" ] && update=1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
snap="$here/snapshots"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0 wrote=0

ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

command -v jq >/dev/null || { echo "snapshots: jq not found (make deps installs it)"; exit 1; }

# Every number to 4 significant digits (jq prints the shortest form; large
# numbers are scaled down and back up by whole powers of ten, so 1.053e8 prints
# as 105300000, not 105299999.99999999).
round='def sig4: if . == 0 then 0 else (fabs | log10 | floor) as $e
	| if $e >= 3 then pow(10; $e - 3) as $m | ((. / $m) | round) * $m
	  else pow(10; 3 - $e) as $m | ((. * $m) | round) / $m end end;
	walk(if type == "number" then sig4 else . end)'

# compare_or_write KIND NAME FILE: FILE holds the new snapshot.
compare_or_write() {
	local want="$snap/$1/$2"
	if [ $update = 1 ]; then
		mkdir -p "$snap/$1"
		if ! cmp -s "$3" "$want" 2>/dev/null; then
			cp "$3" "$want"
			wrote=$((wrote + 1))
			echo "snapshots: wrote tests/snapshots/$1/$2"
		fi
		ok
	elif [ ! -f "$want" ]; then
		bad "$1/$2: no snapshot (run make snapshots and commit it)"
	elif ! diff -u "$want" "$3" >"$tmp/diff"; then
		bad "$1/$2 differs from its snapshot (make snapshots to accept):"
		head -n 40 "$tmp/diff"
	else
		ok
	fi
}

cd "$root" || exit 1
db="$tmp/none.db"
seen="$tmp/seen"
: >"$seen"

# scenarios: every .ini under scenarios/ but the sweeps
for f in $(find scenarios -name '*.ini' -not -path 'scenarios/sweeps/*' | LC_ALL=C sort); do
	name=$(printf '%s' "${f#scenarios/}" | sed 's|/|__|g; s|\.ini$||').json
	echo "simulate/$name" >>"$seen"
	rm -f "$db"
	if ! "$root/$bin/simulate" --json --db "$db" "$f" >"$tmp/out.json" 2>"$tmp/err"; then
		bad "simulate $f: $(head -c 300 "$tmp/err")"
		continue
	fi
	jq --indent 1 "$round" "$tmp/out.json" >"$tmp/snap" || { bad "simulate $f: output is not JSON"; continue; }
	compare_or_write simulate "$name" "$tmp/snap"
done

# sweeps: the header, each cell, each candidate's result on a line of its own
cells='(del(.cells) | tojson), (.cells[] | (del(.results) | tojson), (.results[] | tojson))'
for f in $(find scenarios/sweeps -name '*.ini' | LC_ALL=C sort); do
	name=$(basename "$f" .ini).jsonl
	echo "recommend/$name" >>"$seen"
	rm -f "$db"
	if ! "$root/$bin/recommend" --quiet --no-progress --db "$db" --json "$tmp/out.json" "$f" \
		>/dev/null 2>"$tmp/err"; then
		bad "recommend $f: $(head -c 300 "$tmp/err")"
		continue
	fi
	jq -r "$round | $cells" "$tmp/out.json" >"$tmp/snap" || { bad "recommend $f: output is not JSON"; continue; }
	compare_or_write recommend "$name" "$tmp/snap"
done

# snapshots whose scenario or sweep is gone
for k in simulate recommend; do
	[ -d "$snap/$k" ] || continue
	for s in "$snap/$k"/*; do
		[ -e "$s" ] || continue
		grep -qxF "$k/$(basename "$s")" "$seen" && continue
		if [ $update = 1 ]; then
			rm -f "$s"
			echo "snapshots: removed tests/snapshots/$k/$(basename "$s")"
		else
			bad "$k/$(basename "$s"): its scenario or sweep no longer exists (make snapshots removes it)"
		fi
	done
done

if [ $update = 1 ]; then
	echo "snapshots: $pass checked, $wrote written"
else
	echo "snapshots: $pass passed, $fail failed"
fi
[ $fail -eq 0 ]
