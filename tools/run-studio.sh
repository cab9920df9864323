#!/bin/sh
# Set up, build and launch RLX Studio from the source tree.
#   tools/run-studio.sh [rlx-studio arguments, e.g. --model FILE.gguf]
set -eu
cd "$(dirname "$0")/.."
tools/setup.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
exec build/app/rlx-studio "$@"
