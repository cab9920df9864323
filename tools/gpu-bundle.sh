#!/bin/sh
# Packs a release build, the shared libraries it needs beyond glibc, and the
# test data the GPU checks read into one .tar.xz, for a lent GPU machine that
# has NVIDIA's driver but none of Debian's libraries (tools/cuda-check.sh runs
# there). Usage: tools/gpu-bundle.sh [BUILD_DIR] [OUT.tar.xz] [BINS]
# The archive has three folders: build-release/ (the binaries, laid out as in
# the build tree), lib/ (the libraries) and data/ (a subset of ../shared/data).
# tools/gpu-unpack.sh puts them where the binaries look for them.
# BINS (optional): which of the binaries below to pack, e.g. "app/rlx
# tests/test-cuda-device", for a run that needs few (each test binary holds
# the whole library, kernels included, and the carry to a lent machine is
# limited to 64 MiB).
set -eu
build=${1:-build-release}
out=${2:-.dev/bundle.tar.xz}
only=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
data="$root/../shared/data"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

bins="app/rlx tests/test-cuda-device tests/test-cuda-host tests/test-conformance
      tests/test-llm-stories tests/test-taef2 tests/test-whisper tests/test-llm-offload
      tests/test-session tests/test-sam tests/write-sam-model tests/test-backend-vulkan
      tests/test-flux2-dit-tiny tests/write-flux2-model"
bins=${only:-$bins}
mkdir -p "$stage/build-release/app" "$stage/build-release/tests" "$stage/lib" "$stage/data"
cp -P "$build"/librlx.so "$build"/librlx.so.0 "$build"/librlx.so.0.*[0-9] "$stage/build-release/"
for b in $bins; do cp "$build/$b" "$stage/build-release/$b"; done

# every library the binaries load except the C library's own
for b in $bins; do ldd "$build/$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|librlx)\.so' |
    while read -r l; do cp -L "$l" "$stage/lib/"; done
# what NVIDIA's Vulkan driver (libGLX_nvidia) loads, absent from a bare image
for l in libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libX11.so.6 libX11-xcb.so.1 libXext.so.6 \
         libxcb.so.1 libXau.so.6 libXdmcp.so.6 libbsd.so.0 libmd.so.0; do
    f=/usr/lib/x86_64-linux-gnu/$l
    [ -e "$f" ] && cp -L "$f" "$stage/lib/"
done

for d in llm/stories260K.gguf vae tokenizers/ggml-vocab-qwen2.gguf \
         tokenizers/ggml-vocab-llama-bpe.gguf whisper audio; do
    mkdir -p "$stage/data/$(dirname "$d")"
    cp -r "$data/$d" "$stage/data/$d"
done
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - build-release lib data | xz -T0 -6 >"$out"
ls -l "$out"
