#!/bin/sh
# FLUX.2 [klein] text-to-image: rlx imagine beside stable-diffusion.cpp's
# sd-cli, on the same files, prompt, size, steps, seed and threads, one after
# the other in one run. Prints the text encoder's seconds, the sampling's
# seconds (all steps) and per step, the VAE decode's seconds and the whole
# generation, for both, and their ratio.
#
# usage: tools/bench-flux2.sh RLX SD_CLI TRANSFORMER TEXT_ENCODER VAE
#   RLX           our rlx binary (a release build: build-release/app/rlx)
#   SD_CLI        stable-diffusion.cpp's sd-cli, built outside the repository
#   TRANSFORMER   the transformer file both read (BFL-named .safetensors or .gguf)
#   TEXT_ENCODER  Qwen3 .gguf
#   VAE           the FLUX.2 VAE .safetensors (BFL names, as ae.safetensors)
# Environment: SIZE (default 512), STEPS (default 2), THREADS (default 2),
# REPEAT (default 1), OUT (scratch folder, default /tmp/rlx-bench-flux2).
set -u
[ $# -eq 5 ] || { sed -n 2,17p "$0" >&2; exit 2; }
RLX=$1 SD=$2 T=$3 TE=$4 VAE=$5
SIZE=${SIZE:-512} STEPS=${STEPS:-2} THREADS=${THREADS:-2} REPEAT=${REPEAT:-1}
OUT=${OUT:-/tmp/rlx-bench-flux2}
PROMPT="a lighthouse on a cliff at dawn, oil on canvas"
mkdir -p "$OUT" || exit 2

ours() {
    log="$OUT/rlx.log"
    "$RLX" imagine -m "$T" --text-encoder "$TE" --vae "$VAE" -p "$PROMPT" -W "$SIZE" -H "$SIZE" \
        --steps "$STEPS" --seed 1 -t "$THREADS" -o "$OUT/rlx.png" --force 2> "$log" ||
        { echo "rlx imagine failed:" >&2; tail -3 "$log" >&2; return 1; }
    text=$(sed -n 's/.*prompt encoded in \([0-9.]*\) s$/\1/p' "$log")
    last=$(sed -n 's/.*step [0-9]* of [0-9]*, \([0-9.]*\) s.*/\1/p' "$log" | tail -1)
    dec0=$(sed -n 's/.*decoding the picture (\([0-9.]*\) s so far.*/\1/p' "$log")
    total=$(sed -n '/ written /s/.* in \([0-9.]*\) s$/\1/p' "$log")
    echo "$text $last $dec0 $total" | awk -v n="$STEPS" '{ printf "%.2f %.2f %.2f %.2f %.2f\n",
        $1, $2 - $1, ($2 - $1) / n, $4 - $3, $4 }'
}

theirs() {
    log="$OUT/sd.log"
    "$SD" --diffusion-model "$T" --llm "$TE" --vae "$VAE" -p "$PROMPT" -W "$SIZE" -H "$SIZE" \
        --steps "$STEPS" --cfg-scale 1.0 --sampling-method euler -s 1 -t "$THREADS" \
        -o "$OUT/sd.png" > "$log" 2>&1 ||
        { echo "sd-cli failed:" >&2; tail -5 "$log" >&2; return 1; }
    text=$(sed -n 's/.*get_learned_condition completed, taking \([0-9.]*\)s.*/\1/p' "$log")
    samp=$(sed -n 's/.*sampling completed, taking \([0-9.]*\)s.*/\1/p' "$log")
    dec=$(sed -n 's/.*decode_first_stage completed, taking \([0-9.]*\)s.*/\1/p' "$log")
    total=$(sed -n 's/.*generate_image completed in \([0-9.]*\)s.*/\1/p' "$log")
    echo "$text $samp $dec $total" | awk -v n="$STEPS" '{ printf "%.2f %.2f %.2f %.2f %.2f\n",
        $1, $2, $2 / n, $3, $4 }'
}

echo "FLUX.2 [klein] ${SIZE}x${SIZE}, $STEPS steps, $THREADS threads, seed 1"
echo "transformer $(basename "$T"), text encoder $(basename "$TE"), VAE $(basename "$VAE")"
printf '%-8s %9s %11s %9s %9s %9s\n' "" "text s" "sampling s" "s/step" "decode s" "total s"
i=0
while [ "$i" -lt "$REPEAT" ]; do
    a=$(ours) || exit 1
    b=$(theirs) || exit 1
    # shellcheck disable=SC2086
    printf '%-8s %9.2f %11.2f %9.2f %9.2f %9.2f\n' rlx $a
    # shellcheck disable=SC2086
    printf '%-8s %9.2f %11.2f %9.2f %9.2f %9.2f\n' sd.cpp $b
    echo "$a $b" | awk '{ printf "%-8s %9.2f %11.2f %9.2f %9.2f %9.2f  (sd.cpp time / ours)\n", "ratio",
        $6 / $1, $7 / $2, $8 / $3, $9 / $4, $10 / $5 }'
    i=$((i + 1))
done
