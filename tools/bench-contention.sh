#!/bin/sh
# Decode and prompt speed beside a competing busy process.
#   tools/bench-contention.sh [--rlx PATH] [--cpus LIST] [-r N] [-p N] [-n N] MODEL.gguf...
# For each model, `rlx bench` with -t 1 and with the default thread count,
# on the machine as it is ("quiet") and beside one `yes > /dev/null` (one
# busy process, "busy"); the four runs alternate, and the whole set repeats
# -r times (default 2). --cpus pins rlx and the competitor to these CPUs
# (taskset), e.g. two CPUs of different cores to measure a 2-core machine
# on a bigger one. Prints a Markdown table of tokens/s (mean over the
# repeats of rlx bench's own 3-run means) and the threads the runs used.
set -eu
rlx="$(cd "$(dirname "$0")/.." && pwd)/build/app/rlx"
cpus=""
reps=2
p=64
n=64
while [ $# -gt 0 ]; do
    case "$1" in
    --rlx) rlx="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    -r) reps="$2"; shift 2 ;;
    -p) p="$2"; shift 2 ;;
    -n) n="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "bench-contention: unknown option $1 (see --help)" >&2; exit 1 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "bench-contention: no model (see --help)" >&2; exit 1; }
pin=""
[ -z "$cpus" ] || pin="taskset -c $cpus"
tmp=$(mktemp -d)
yes_pid=""
cleanup() {
    [ -z "$yes_pid" ] || kill "$yes_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# field NAME of the k-th test (1: pp, 2: tg) of a bench --json output
field() {
    grep -o "\"$2\":[ ]*[0-9.e+-]*" "$1" | sed -n "${3}p" | sed 's/.*: *//'
}

echo "| model | machine | -t | threads | pp$p t/s | tg$n t/s |"
echo "| --- | --- | --- | --- | ---: | ---: |"
for model in "$@"; do
    name=$(basename "$model" .gguf)
    for r in $(seq 1 "$reps"); do
        for cond in quiet busy; do
            if [ "$cond" = busy ]; then
                $pin sh -c 'exec yes > /dev/null' &
                yes_pid=$!
                sleep 0.5
            fi
            for t in 1 0; do
                out="$tmp/$name-$cond-$t-$r.json"
                # t 0: the default (no -t; rlx refuses -t 0)
                targ=""
                [ "$t" = 0 ] || targ="-t $t"
                # shellcheck disable=SC2086
                $pin "$rlx" bench -m "$model" -p "$p" -n "$n" -r 3 $targ --json > "$out"
            done
            if [ -n "$yes_pid" ]; then
                kill "$yes_pid"
                wait "$yes_pid" 2>/dev/null || true
                yes_pid=""
            fi
        done
    done
    for cond in quiet busy; do
        for t in 1 0; do
            pp=0 tg=0 thr="" used=""
            for r in $(seq 1 "$reps"); do
                out="$tmp/$name-$cond-$t-$r.json"
                pp=$(awk -v a="$pp" -v b="$(field "$out" tps_mean 1)" 'BEGIN { print a + b }')
                tg=$(awk -v a="$tg" -v b="$(field "$out" tps_mean 2)" 'BEGIN { print a + b }')
                thr=$(field "$out" threads 1)
                used=$(field "$out" threads_used 2)
            done
            label="$thr"
            [ -z "$used" ] || [ "$used" = "$thr" ] || label="$used of $thr"
            opt=$([ "$t" = 0 ] && echo default || echo 1)
            awk -v m="$name" -v c="$cond" -v o="$opt" -v l="$label" -v pp="$pp" -v tg="$tg" \
                -v r="$reps" 'BEGIN { printf "| %s | %s | %s | %s | %.1f | %.1f |\n", m, c, o, l, pp / r, tg / r }'
        done
    done
done
