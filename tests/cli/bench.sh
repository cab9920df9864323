#!/bin/sh
# rlx bench -m: llama-bench's pp/tg table on stories260K, on the CPU and on
# the first Vulkan device (skipped, exit 77, when there is none): the table's
# shape, positive figures, the bandwidth-floor and memory lines, per-op times
# on the GPU device, --json, and one-line errors with exit status 1.
set -u
rlx=$1
data=$2
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$data/README.md" "$data/llm/stories260K.gguf"
fail=0
check() { # check DESCRIPTION COMMAND...
    desc=$1
    shift
    if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; fail=1; fi
}
stories="$data/llm/stories260K.gguf"
num='[0-9][0-9]*\.[0-9][0-9]*'

# table_ok OUTPUT DEVICE: header, separator and the pp16 / tg8 rows with
# tokens per second "mean ± sd", mean > 0
table_ok() {
    printf '%s\n' "$1" | awk -v dev="$2" '
        NR == 1 { ok = ($0 ~ /^\| model +\| +size \| +params \| types +\| device +\| threads \| +test \| +t\/s \|$/) }
        NR == 2 { ok = ok && ($0 ~ /^\| -+ \| -+: \| -+: \|/) }
        NR == 3 || NR == 4 {
            n = split($0, f, "|")
            want = NR == 3 ? "pp16" : "tg8"
            gsub(/ /, "", f[8]); gsub(/ /, "", f[6]); gsub(/ /, "", f[2])
            split(f[9], t, "±")
            ok = ok && n == 10 && f[2] == "stories260K.gguf" && f[6] == dev && f[8] == want
            ok = ok && (t[1] + 0) > 0 && (t[2] + 0) >= 0 && f[3] ~ /[MG]iB/ && f[5] ~ /F32:48/
        }
        END { exit !(ok && NR >= 4) }'
}

out=$("$rlx" bench -m "$stories" -p 16 -n 8 -r 1 -t 2)
check "cpu: exit 0" [ $? -eq 0 ]
check "cpu: the table" table_ok "$out" cpu
check "cpu: generation against the bandwidth floor" \
    sh -c 'printf "%s\n" "$1" | grep -Eq "^tg8 is [0-9]+% of the bandwidth floor \(0\.[0-9]+ GB/token, [0-9.]+ GB/s"' _ "$out"
bw=$(printf '%s\n' "$out" | sed -n 's/.*GB\/token, \([0-9.]*\) GB\/s.*/\1/p')
check "cpu: bandwidth positive ($bw GB/s)" awk -v b="$bw" 'BEGIN { exit !(b > 0) }'
check "cpu: peak RSS against file + KV cache" \
    sh -c 'printf "%s\n" "$1" | grep -Eq "^memory: peak RSS [0-9.]+ MiB; file [0-9.]+ MiB \+ KV cache"' _ "$out"
check "cpu: no op table without --ops" sh -c '! printf "%s\n" "$1" | grep -q "^op times"' _ "$out"

json=$("$rlx" bench -m "$stories" -p 8 -n 4 -r 2 -t 2 --json)
check "--json: exit 0" [ $? -eq 0 ]
check "--json: tests, samples, bytes per token" python3 -c '
import json, sys
j = json.loads(sys.argv[1])
t = {x["test"]: x for x in j["tests"]}
assert set(t) == {"pp8", "tg4"}, t
for x in t.values():
    assert x["tps_mean"] > 0 and len(x["tps_samples"]) == 2
assert j["n_params"] > 250000 and j["bytes_per_token"] > 0 and j["peak_rss_bytes"] > 0
assert j["device"] == "cpu" and j["threads"] == 2
' "$json"

# one-line errors, exit 1
for args in "-m /nonexistent.gguf" "-m $stories -p 0" "-m $stories -n x" "-m $stories -r 0" \
    "-m $stories --bogus" "-p 16" "-m $stories --ctx 8 -p 16" "-m $data/README.md"; do
    # shellcheck disable=SC2086
    err=$("$rlx" bench $args 2>&1 >/dev/null)
    rc=$?
    check "error exit 1: $args" [ $rc -eq 1 ]
    check "one line naming the problem: $args" \
        sh -c '[ "$(printf "%s\n" "$1" | wc -l)" -eq 1 ] && printf "%s" "$1" | grep -q "^rlx: bench: "' _ "$err"
done

# Vulkan: the same table plus per-op times, every op on the device
out=$("$rlx" bench -m "$stories" -p 16 -n 8 -r 1 -t 2 --device vulkan:0 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -Eqi "no vulkan|no device"; then
    echo "# no Vulkan device: $out"
    [ $fail -eq 0 ] && exit 77
    exit 1
fi
check "vulkan: exit 0" [ $rc -eq 0 ]
check "vulkan: the table" table_ok "$out" vulkan:0
check "vulkan: all 5 decoder layers placed on the device" \
    sh -c 'printf "%s\n" "$1" | grep -q "^placement: 5 of 5 decoder layers on vulkan:0$"' _ "$out"
ops=$(printf '%s\n' "$out" | sed -n '/^op times/,$p' | sed '1,2d' | grep -v '^  total')
check "vulkan: per-op times listed" [ -n "$ops" ]
check "vulkan: matmul and attention among them" \
    sh -c 'printf "%s\n" "$1" | grep -q "^  matmul " && printf "%s\n" "$1" | grep -q "^  attention "' _ "$ops"
check "vulkan: every op ran on vulkan:0 with a positive count" \
    sh -c 'printf "%s\n" "$1" | awk "{ if (\$NF != \"vulkan:0\" || \$2 + 0 <= 0 || \$3 + 0 < 0) bad = 1 } END { exit bad }"' _ "$ops"
exit $fail
