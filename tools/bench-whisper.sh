#!/bin/sh
# Whisper speed, ours beside whisper.cpp's, on the same model file, audio
# and thread count, in one session:
#   tools/bench-whisper.sh RLX WHISPER_CPP_BIN_DIR MODEL.bin AUDIO [THREADS] [REPEATS]
# RLX is our `rlx` (a release build); WHISPER_CPP_BIN_DIR holds whisper.cpp's
# whisper-bench and whisper-cli (build it outside this repository, e.g.
#   git clone https://github.com/ggml-org/whisper.cpp /tmp/whisper.cpp
#   cmake -S /tmp/whisper.cpp -B /tmp/whisper.cpp/build -DCMAKE_BUILD_TYPE=Release
#   cmake --build /tmp/whisper.cpp/build -j --target whisper-cli whisper-bench).
# Encoder: one 30-s window (whisper-bench's encode, our bench whisper's).
# Decoder: 256 single-token steps from position 0 (whisper-bench's "decode",
# ours the same protocol). File: greedy, no fallback, timestamps, English,
# whole-run wall time. The runs alternate, REPEATS times (default 3), so a
# busy machine slows both alike; medians are printed.
set -eu
rlx=$1 wdir=$2 model=$3 audio=$4 threads=${5:-2} reps=${6:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
i=0
while [ $i -lt "$reps" ]; do
    "$wdir/whisper-bench" -m "$model" -t "$threads" >"$tmp/wb" 2>&1
    sed -n 's/.*encode time = *[0-9.]* ms \/ *1 runs ( *\([0-9.]*\) ms per run).*/\1/p' "$tmp/wb" >>"$tmp/w-enc"
    sed -n 's/.*decode time = *[0-9.]* ms \/ *[0-9]* runs ( *\([0-9.]*\) ms per run).*/\1/p' "$tmp/wb" >>"$tmp/w-dec"
    sed -n 's/.*prompt time = *[0-9.]* ms \/ *[0-9]* runs ( *\([0-9.]*\) ms per run).*/\1/p' "$tmp/wb" >>"$tmp/w-pp"
    "$rlx" bench whisper -m "$model" -t "$threads" -r 1 >"$tmp/rb" 2>&1
    sed -n 's/^encoder *\([0-9.]*\) ms.*/\1/p' "$tmp/rb" >>"$tmp/r-enc"
    sed -n 's/^decoder *\([0-9.]*\) ms.*/\1/p' "$tmp/rb" >>"$tmp/r-dec"
    sed -n 's/^prompt *\([0-9.]*\) ms.*/\1/p' "$tmp/rb" >>"$tmp/r-pp"
    s=$(date +%s.%N)
    "$wdir/whisper-cli" -m "$model" -f "$audio" -t "$threads" -l en -bs 1 -bo 1 -nf >/dev/null 2>"$tmp/wc"
    e=$(date +%s.%N)
    echo "$e - $s" | bc >>"$tmp/w-file"
    # tokens it decoded: its single steps and batched runs
    sed -n 's/.*\(decode\|batchd\) time = *[0-9.]* ms \/ *\([0-9]*\) runs.*/\2/p' "$tmp/wc" |
        awk '{n += $1} END {print n}' >>"$tmp/w-tok"
    s=$(date +%s.%N)
    "$rlx" transcribe -m "$model" -f "$audio" -t "$threads" --language en --no-fallback -q >/dev/null 2>"$tmp/rc"
    e=$(date +%s.%N)
    echo "$e - $s" | bc >>"$tmp/r-file"
    sed -n 's/.*tokens\/s (\([0-9]*\)).*/\1/p' "$tmp/rc" >>"$tmp/r-tok"
    i=$((i + 1))
done
printf '%-34s %12s %12s %8s\n' "$(basename "$model"), $threads threads" "rlx" "whisper.cpp" "ratio"
row() {
    r=$(median <"$tmp/r-$1") w=$(median <"$tmp/w-$1")
    printf '%-34s %12s %12s %7.2fx\n' "$2" "$r" "$w" "$(echo "$w / $r" | bc -l)"
}
row enc "encoder, ms per 30-s window"
row dec "decoder, ms per token"
row pp "prompt, ms per token"
row file "$(basename "$audio"), s (whole run)"
row tok "  tokens it decoded (its own text)"
echo "(the whole runs decode their own text: on random weights the two stop after"
echo " different numbers of tokens, so compare the stage rows; on a trained model"
echo " the texts, and so the token counts, agree)"
