#!/bin/sh
# run-fuzz.sh TARGET SECONDS [SEED...]: fuzz for a bounded time from a fresh
# corpus seeded with the given files; fails on any crash or sanitizer report.
set -eu
target=$(realpath "$1") # the run below happens inside the corpus folder
seconds=$2
shift 2
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
# a seed from ../shared/data that is absent would quietly weaken the run
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$@"
for s in "$@"; do
    cp "$s" "$corpus/"
done
cd "$corpus"
exec "$target" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=1048576 \
    -timeout=10 -print_final_stats=1 "$corpus"
