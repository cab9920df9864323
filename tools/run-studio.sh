#!/bin/sh
# Set up, build and launch RLX Studio from the source tree.
#   tools/run-studio.sh [rlx-studio arguments, e.g. --model FILE.gguf]
#   tools/run-studio.sh --build-only     build, do not launch
# Builds in build-studio/: a release build of the library, `rlx` and
# `rlx-studio` only (no tests, no fuzzers; tools/test.sh builds those in
# build/), so the first launch compiles what it runs, optimized. The
# binaries: build-studio/app/rlx, build-studio/app/rlx-studio.
set -eu
cd "$(dirname "$0")/.."
launch=1
if [ "${1:-}" = "--build-only" ]; then
    launch=0
    shift
fi
builddir=build-studio
tools/setup.sh
if [ ! -f "$builddir/build.ninja" ]; then
    # CUDA kernels only where an NVIDIA driver is installed, and then for
    # this machine's GPUs (tools/test.sh builds every architecture)
    cuda="-Dcuda=disabled"
    if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
        cuda="-Dcuda=auto"
        sm=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
            tr -d ' .' | sort -u | paste -sd, -)
        [ -n "$sm" ] && cuda="$cuda -Dnvidia_sm=$sm"
    fi
    # shellcheck disable=SC2086
    meson setup "$builddir" -Dbuildtype=release -Dtests=false -Dfuzz=disabled $cuda
fi
ninja -C "$builddir"
[ "$launch" -eq 1 ] || exit 0
exec "$builddir/app/rlx-studio" "$@"
