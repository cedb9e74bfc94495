#!/usr/bin/env bash
# gpu_bundle.sh — packs what a GPU machine needs to run the campaign without
# building: dist/bin (gpu_tests, gpu_bench, validate, simulate when built) and
# dist/lib (their shared libraries except glibc and CUDA's own, which the GPU
# machine must provide: libcudart/libcublas/libcublasLt .so.13, libnccl .so.2).
# dist/ is git-ignored; the device tool carries it (run ... carry=["dist"]).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
make -j"$(nproc)" bin/gpu_tests bin/gpu_bench >/dev/null
make -j"$(nproc)" bin/validate >/dev/null 2>&1 || echo "gpu_bundle: bin/validate does not build yet; bundling without it"
rm -rf dist
mkdir -p dist/bin dist/lib
for b in gpu_tests gpu_bench validate simulate; do
	[ -x "bin/$b" ] && cp "bin/$b" dist/bin/
done
for b in dist/bin/*; do
	ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
	case "$(basename "$lib")" in
	libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcudart*|libcublas*|libnccl*) ;;
	*) cp -L "$lib" dist/lib/ ;;
	esac
done
du -sh dist | sed 's/^/gpu_bundle: /'
echo "gpu_bundle: on the GPU machine: scripts/gpu_campaign.sh (it uses dist/ when it cannot build)"
