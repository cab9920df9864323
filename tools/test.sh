#!/bin/sh
# Set up, build and run the whole test suite.
#   tools/test.sh               build in build/ (debugoptimized) and test
#   tools/test.sh --sanitize    build in build-asan/ with ASan+UBSan and test
#   tools/test.sh --release     build in build-release/ (release) and test
# Extra arguments after `--` go to `meson test` (e.g. -- --suite unit).
set -eu
cd "$(dirname "$0")/.."
builddir=build
setup_args=""
while [ $# -gt 0 ]; do
    case "$1" in
    --sanitize) builddir=build-asan
        setup_args="-Db_sanitize=address,undefined -Dbuildtype=debug -Db_lundef=false" ;;
    --release) builddir=build-release; setup_args="-Dbuildtype=release" ;;
    --) shift; break ;;
    *) echo "usage: tools/test.sh [--sanitize|--release] [-- MESON_TEST_ARGS]" >&2; exit 2 ;;
    esac
    shift
done
tools/setup.sh
if [ ! -f "$builddir/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$builddir" -Dtests=true $setup_args
fi
ninja -C "$builddir"
# Sanitizers: fail on the first report; leaks count as failures.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$(pwd)/tests/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
exec meson test -C "$builddir" --print-errorlogs --num-processes 2 "$@"
