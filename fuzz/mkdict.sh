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
{ words sim/inputs/scenario.c sim/core/cfg.c sim/core/units.c sim/models/failures.c sim/inputs/hw.c sim/inputs/model.c
  printf '%s\n' '"["' '"]"' '"="' '";"' '"\x0a"' '"GiB"' '"MiB"' '"GB/s"' '"us"' '"1e9"' '"auto"'
} >"$out/scenario.dict"
{ words sim/drivers/sweep.c sim/inputs/scenario.c sim/core/cfg.c
  printf '%s\n' '"["' '"]"' '"="' '","' '"\x0a"' '"..."' '"*"' '"1e40"'
} >"$out/sweep.dict"
{ words sim/inputs/import_hf.c; printf '%s\n' '"{"' '"}"' '"["' '"]"' '":"' '","' '"null"' '"true"'; } >"$out/hf.dict"
{ words sim/inputs/import_ds.c; printf '%s\n' '"{"' '"}"' '"["' '"]"' '":"' '","' '"\"auto\""'; } >"$out/ds.dict"
{ words sim/inputs/import_accel.c
  printf '%s\n' '": "' '"\x0a  "' '"- "' '"&a "' '"*a"' '"{"' '"}"' '"["' '"]"' '"---"'
} >"$out/accel.dict"
