#!/usr/bin/env bash
# Writes libFuzzer dictionaries (build-fuzz/dict/NAME.dict) from the loaders'
# own sources: every quoted name of the key tables and field lists (string
# literals of letters, digits, '_', '.' and '-'), plus the syntax of the format.
# The fuzzer then spends its time on the keys the loaders know.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build-fuzz/dict
mkdir -p "$out"
words() {   # string literals of the given sources, one per line, as dictionary entries
	grep -ohE '"[A-Za-z][A-Za-z0-9_.-]{1,40}"' "$@" | sort -u
}
{ words sim/scenario.c sim/cfg.c sim/units.c sim/failures.c sim/hw.c sim/model.c
  printf '%s\n' '"["' '"]"' '"="' '";"' '"\x0a"' '"GiB"' '"MiB"' '"GB/s"' '"us"' '"1e9"' '"auto"'
} >"$out/scenario.dict"
{ words sim/sweep.c sim/scenario.c sim/cfg.c
  printf '%s\n' '"["' '"]"' '"="' '","' '"\x0a"' '"..."' '"*"' '"1e40"'
} >"$out/sweep.dict"
{ words sim/import_hf.c; printf '%s\n' '"{"' '"}"' '"["' '"]"' '":"' '","' '"null"' '"true"'; } >"$out/hf.dict"
{ words sim/import_ds.c; printf '%s\n' '"{"' '"}"' '"["' '"]"' '":"' '","' '"\"auto\""'; } >"$out/ds.dict"
{ words sim/import_accel.c
  printf '%s\n' '": "' '"\x0a  "' '"- "' '"&a "' '"*a"' '"{"' '"}"' '"["' '"]"' '"---"'
} >"$out/accel.dict"
