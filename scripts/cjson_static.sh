#!/usr/bin/env bash
# cjson_static.sh DIR — DIR/libcjson.a, built from Debian's source package of
# the installed libcjson-dev (same version, Debian's patches applied), so that
# bin/simulate can be linked statically: Debian ships libcjson only as a shared
# library, and a shared library costs each process its loading (make bench's
# bench_process: a whole bin/simulate of the 175B bench 2.10 ms dynamically
# linked, 1.73 ms static, side by side on one core; README, Speed).
#
# apt fetches the source with the machine's own Debian archives read as
# deb-src, into DIR/apt (its own lists and cache: the system's apt state is
# not touched) and checks it against the archive's signed index; dpkg-source
# unpacks it. Run by `make deps`. Never fails the build: when the source
# cannot be had (no network, no deb-src on the mirror) it says why and leaves
# no archive, and the Makefile links bin/simulate dynamically as before.
set -u
dir=${1:?usage: cjson_static.sh DIR}
pkg=libcjson-dev
ver=$(dpkg-query -W -f='${source:Version}' "$pkg" 2>/dev/null) || ver=
src=$(dpkg-query -W -f='${source:Package}' "$pkg" 2>/dev/null) || src=
if [ -z "$ver" ] || [ -z "$src" ]; then
	echo "cjson_static: $pkg is not installed; bin/simulate links libcjson.so"
	exit 0
fi
if [ -f "$dir/libcjson.a" ] && [ "$(cat "$dir/version" 2>/dev/null)" = "$ver" ]; then
	echo "cjson_static: $dir/libcjson.a ($src $ver) ✓"
	exit 0
fi
rm -rf "$dir"
mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
work=$dir/apt
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/parts"
: > "$work/sources.list"
[ -f /etc/apt/sources.list ] && sed -n 's/^deb \(.*\)/deb-src \1/p' /etc/apt/sources.list > "$work/sources.list"
for f in /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] && sed -n 's/^deb \(.*\)/deb-src \1/p' "$f" > "$work/parts/$(basename "$f")"
done
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" > "$work/parts/$(basename "$f")"
done
opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts"
      -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
      -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
log=$dir/fetch.log
if ! apt-get "${opts[@]}" -q update > "$log" 2>&1 ||
   ! (cd "$work" && apt-get "${opts[@]}" -q source --download-only "$src=$ver") >> "$log" 2>&1 ||
   ! (cd "$work" && dpkg-source -x ./*.dsc src) >> "$log" 2>&1 ||
   ! ${CC:-cc} -O2 -c "$work/src/cJSON.c" -o "$dir/cJSON.o" >> "$log" 2>&1; then
	echo "cjson_static: could not build libcjson.a from Debian's $src $ver source ($log); bin/simulate links libcjson.so"
	rm -f "$dir/cJSON.o"
	exit 0
fi
ar rcs "$dir/libcjson.a" "$dir/cJSON.o"
echo "$ver" > "$dir/version"
rm -rf "$work"
echo "cjson_static: $dir/libcjson.a from Debian's $src $ver source ✓"
