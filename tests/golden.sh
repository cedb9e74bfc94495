#!/usr/bin/env bash
# golden.sh BIN — command-line tests of simulate: every bad scenario under
# tests/bad/ (its first line says "; expect: <text>") must exit 2 with that text
# on stderr; generated junk (missing, empty, binary, a 10 MB line, a directory)
# likewise; and the JSON output must parse and hold the contract's keys.
set -u
bin=${1:-bin}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect_error NAME EXPECTED-TEXT ARGS... : exit 2, message contains the text
expect_error() {
	local name=$1 want=$2; shift 2
	"$root/$bin/simulate" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ $rc -ne 2 ]; then bad "$name: exit $rc, expected 2 ($(head -c 300 "$tmp/err"))"; return; fi
	if ! grep -qF -- "$want" "$tmp/err"; then bad "$name: message '$(head -c 300 "$tmp/err")' lacks '$want'"; return; fi
	if [ -s "$tmp/out" ]; then bad "$name: printed a report despite the error"; return; fi
	ok
}

cd "$root" || exit 1
for f in tests/bad/*.ini; do
	want=$(head -n 1 "$f" | sed -n 's/^; expect: //p')
	expect_error "$f" "$want" "$f"
done

# generated junk
good=tests/good/minimal.ini
expect_error missing-file "cannot open: No such file or directory" "$tmp/nope.ini"
: >"$tmp/empty.ini"
expect_error empty-file "no settings found (empty file?)" "$tmp/empty.ini"
printf '; only a comment\n\n' >"$tmp/comment.ini"
expect_error comment-only "no settings found" "$tmp/comment.ini"
head -c 4096 /dev/urandom >"$tmp/junk.ini"
printf '\x00' >>"$tmp/junk.ini"
expect_error binary-junk "expected a text INI file" "$tmp/junk.ini"
{ printf '[model]\nname = '; head -c 10000000 /dev/zero | tr '\0' 'a'; printf '\n'; } >"$tmp/long.ini"
expect_error ten-mb-line "a setting may be at most" "$tmp/long.ini"
expect_error directory "cannot read" "$here"
expect_error set-typo "unknown key 'strategey' in [training]; did you mean 'strategy'?" "$good" --set training.strategey=ddp
expect_error set-form "expected section.key=value" "$good" --set strategy
expect_error set-range "nodes = 0: out of range" "$good" --set cluster.nodes=0
expect_error no-args "expected one scenario file" 
expect_error two-args "got several" "$good" "$good"
expect_error bad-option "unrecognized option" "$good" --frobnicate
printf '[model]\nname = ../nope/model.ini\n[cluster]\ngpu = a100-sxm4-80gb\n' >"$tmp/path.ini"
expect_error model-path "no such file" "$tmp/path.ini"

# the JSON contract (DESIGN.md): parses, and has the keys
if out=$("$root/$bin/simulate" scenarios/default.ini --json 2>"$tmp/err"); then
	if echo "$out" | jq -e '.scenario and .model.name and (.model.params > 0) and .cluster.gpu
	    and (.cluster.gpus == 8) and (.cluster.gpu_memory_bytes > 0) and .training.strategy
	    and .training.precision and (.training | has("micro_batch"))' >/dev/null; then ok
	else bad "json: contract keys missing: $out"; fi
else bad "json: exit $? ($(cat "$tmp/err"))"; fi

# every shipped scenario runs
for f in scenarios/*.ini; do
	if "$root/$bin/simulate" "$f" >"$tmp/out" 2>"$tmp/err"; then ok
	else bad "$f: $(cat "$tmp/err")"; fi
done

# the job model: its JSON keys, --plot, and an error without [failures]
job=tests/good/job.ini
if out=$("$root/$bin/simulate" "$job" --json 2>"$tmp/err"); then
	if echo "$out" | jq -e '(.job.ettr > 0.5) and (.job.ettr <= 1) and (.job.wall_days > 0)
	    and (.job.interruptions > 0) and (.job.checkpoint_interval_s > 0)' >/dev/null; then ok
	else bad "json: job keys missing: $out"; fi
else bad "job json: exit $? ($(cat "$tmp/err"))"; fi
if "$root/$bin/simulate" "$job" --plot "$tmp/ettr.png" >"$tmp/out" 2>"$tmp/err" &&
   [ "$(head -c 4 "$tmp/ettr.png" | od -An -c | tr -d ' ')" = "211PNG" ] && grep -q "plot: wrote $tmp/ettr.png" "$tmp/out"; then ok
else bad "--plot: $(cat "$tmp/err")"; fi
expect_error plot-no-failures "--plot needs a [failures] section" "$good" --plot "$tmp/x.png"
a=$("$root/$bin/simulate" "$job"); b=$("$root/$bin/simulate" "$job")
[ "$a" = "$b" ] && ok || bad "repeat job runs differ"

# --help and --keys
"$root/$bin/simulate" --help | grep -q "usage: simulate" && ok || bad "--help"
"$root/$bin/simulate" --keys | grep -q '`strategy`' && ok || bad "--keys"

# --db records a run, and identical runs repeat byte for byte
db="$tmp/r.db"
if "$root/$bin/simulate" scenarios/default.ini --db "$db" >/dev/null 2>"$tmp/err" &&
   [ "$(sqlite3 "$db" 'select count(*) from runs; select count(*) > 5 from predictions;' | tr '\n' ' ')" = "1 1 " ]; then ok
else bad "--db: $(cat "$tmp/err")"; fi
a=$("$root/$bin/simulate" scenarios/default.ini --json); b=$("$root/$bin/simulate" scenarios/default.ini --json)
[ "$a" = "$b" ] && ok || bad "repeat runs differ"

echo "golden: $pass passed, $fail failed"
[ $fail -eq 0 ]
