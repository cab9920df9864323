#!/bin/sh
# The command line's promise: `rlx`, `rlx --help` and every command's --help
# print that command's own help to stdout and exit 0; bad arguments exit 1
# with exactly one line on stderr (nothing on stdout), naming the problem.
# Needs no model: every bad argument here is refused before a file is read.
set -u
rlx=$1
fail=0
tmp=${TMPDIR:-/tmp}/rlx-args.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fail=1; }

# run ARGS...: exit code in $rc, stdout in $tmp/out, stderr in $tmp/err
run() {
    "$rlx" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
}

# help: DESCRIPTION FIRST_LINE_PATTERN ARGS...
help() {
    desc=$1 pat=$2
    shift 2
    run "$@"
    first=$(head -n 1 "$tmp/out")
    if [ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && [ "$(wc -l <"$tmp/out")" -ge 2 ]; then
        case "$first" in
        $pat) ok "$desc" ;;
        *) bad "$desc: its first line is '$first', not $pat" ;;
        esac
    else
        bad "$desc: exit $rc, $(wc -l <"$tmp/out") lines on stdout, stderr: $(cat "$tmp/err")"
    fi
}

help "rlx alone" "usage: rlx COMMAND*"
help "rlx --help" "usage: rlx COMMAND*" --help
help "rlx -h" "usage: rlx COMMAND*" -h
# every command the overview lists (so a new one is covered without a line here)
commands=$("$rlx" --help | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
[ "$(echo "$commands" | wc -w)" -ge 8 ] && ok "the overview lists the commands" ||
    bad "the overview lists only: $commands"
for c in $commands; do
    help "rlx $c --help" "usage: rlx $c *" "$c" --help
    help "rlx $c -h" "usage: rlx $c *" "$c" -h
    help "rlx help $c" "usage: rlx $c *" help "$c"
done
help "rlx bench ops --help" "usage: rlx bench ops *" bench ops --help
help "rlx bench sam --help" "usage: rlx bench sam *" bench sam --help
# --help wins wherever it stands
help "rlx generate -m x --help" "usage: rlx generate *" generate -m x --help
run --version
[ $rc -eq 0 ] && grep -q '^rlx [0-9]' "$tmp/out" && ok "--version" || bad "--version: exit $rc"

# The CPUs this process may run on (nproc reads the affinity mask, as rlx does).
cpus=$(nproc)
over=$((cpus + 1))

# A table of bad arguments: the pattern the one line must match, then the
# arguments. Patterns are shell patterns ([ starts a bracket expression: a
# literal one is written ?).
while IFS='|' read -r pat args; do
    [ -z "$pat" ] && continue
    # shellcheck disable=SC2086
    set -- $args
    run "$@"
    lines=$(wc -l <"$tmp/err")
    line=$(cat "$tmp/err")
    if [ $rc -ne 1 ]; then
        bad "rlx $args: exit $rc, not 1 (stderr: $line)"
    elif [ "$lines" -ne 1 ]; then
        bad "rlx $args: $lines lines on stderr, not 1: $line"
    elif [ -s "$tmp/out" ]; then
        bad "rlx $args: wrote to stdout: $(head -n 3 "$tmp/out")"
    else
        case "$line" in
        $pat) ok "rlx $args: $line" ;;
        *) bad "rlx $args: '$line' does not match '$pat'" ;;
        esac
    fi
done <<TABLE
rlx: unknown command 'bogus' (see rlx --help)|bogus
rlx: unknown option '--bogus' (see rlx --help)|--bogus
rlx: generate: unknown option '--bogus' (see rlx generate --help)|generate -m x --bogus
rlx: generate: unknown option '--bogus' (see rlx generate --help)|generate -m x --bogus 1
rlx: generate: unexpected argument 'stray' (see rlx generate --help)|generate -m x stray
rlx: generate: -p needs a value (see rlx generate --help)|generate -m x -p
rlx: generate: no model; use -m MODEL.gguf*|generate -p hi
rlx: generate: --temp -1 is out of range: it must be >= 0*|generate -m x -p hi --temp -1
rlx: generate: --temp wants a number*not 'abc'|generate -m x -p hi --temp abc
rlx: generate: --top-p 1.5 is out of range: it must be in (0, 1]*|generate -m x -p hi --top-p 1.5
rlx: generate: --min-p -0.1 is out of range*|generate -m x -p hi --min-p -0.1
rlx: generate: --top-k wants a whole number >= 0*not '-2'|generate -m x -p hi --top-k -2
rlx: generate: --mirostat wants a whole number in ?0, 2? (0 = off), not '3'|generate -m x -p hi --mirostat 3
rlx: generate: --repeat-penalty 0 is out of range: it must be > 0*|generate -m x -p hi --repeat-penalty 0
rlx: generate: --seed wants a whole number >= 0, not '-5'|generate -m x -p hi --seed -5
rlx: generate: -t 0 is out of range: this process may run on $cpus CPU*, so give 1 to $cpus*|generate -m x -p hi -t 0
rlx: generate: -t $over is out of range: this process may run on $cpus CPU*|generate -m x -p hi -t $over
rlx: generate: -t wants a thread count, not 'two'|generate -m x -p hi -t two
rlx: generate: --gpu-layers wants a layer count: N >= 1, 0 (none) or -1 (as many as the budget holds), not '-3'|generate -m x -p hi --gpu-layers -3
rlx: generate: -n wants a number of tokens (0 or -1: until the end of the text or a full context), not '-2'|generate -m x -p hi -n -2
rlx: generate: --ctx wants a number of tokens >= 2, not '1'|generate -m x -p hi --ctx 1
rlx: generate: --kv-type is f16, f32 or q8_0, not 'q4'|generate -m x -p hi --kv-type q4
rlx: generate: --memory-budget wants a size like 6G or 512M, not 'lots'|generate -m x -p hi --memory-budget lots
rlx: generate: --logit-bias wants TOKEN_ID+BIAS or TOKEN_ID-BIAS*|generate -m x -p hi --logit-bias 5
rlx: chat: unknown option '--bogus' (see rlx chat --help)|chat -m x --bogus
rlx: chat: -p is an option of rlx generate; chat reads its turns from stdin*|chat -m x -p hi
rlx: chat: --temp -1 is out of range*|chat -m x --temp -1
rlx: chat: -t 0 is out of range*|chat -m x -t 0
rlx: chat: --gpu-layers wants a layer count*not '-3'|chat -m x --gpu-layers -3
rlx: transcribe: -f AUDIO or --mic is required (see rlx transcribe --help)|transcribe -m x
rlx: transcribe: -m MODEL is required (see rlx transcribe --help)|transcribe -f a.wav
rlx: transcribe: unknown option '--bogus' (see rlx transcribe --help)|transcribe -m x -f a.wav --bogus
rlx: transcribe: --beam-size must be 1 to 16, not '0'|transcribe -m x -f a.wav --beam-size 0
rlx: transcribe: --temperature must be 0 to 1, not '-1'|transcribe -m x -f a.wav --temperature -1
rlx: transcribe: -t 0 is out of range*|transcribe -m x -f a.wav -t 0
rlx: transcribe: --language xx: not a Whisper language*|transcribe -m x -f a.wav --language xx
rlx: transcribe: --offset must be seconds >= 0, not '-1'|transcribe -m x -f a.wav --offset -1
rlx: transcribe: -o out.doc: the name must end in .txt, .srt, .vtt or .json|transcribe -m x -f a.wav -o out.doc
rlx: chat: no model; use -m MODEL.gguf*|chat
rlx: info: unknown option '--bogus' (see rlx info --help)|info --bogus
rlx: info: no file given (see rlx info --help)|info
rlx: info: more than one file given*|info a b
rlx: info: --devices takes no file*|info --devices a
rlx: tokenize: unknown option '--bogus' (see rlx tokenize --help)|tokenize -m x --bogus hi
rlx: tokenize: -m needs a value (see rlx tokenize --help)|tokenize -m
rlx: tokenize: no text given (see rlx tokenize --help)|tokenize -m x
rlx: quantize: unknown option '--bogus' (see rlx quantize --help)|quantize a b Q8_0 --bogus
rlx: quantize: no output file; usage: rlx quantize IN.gguf OUT.gguf TYPE*|quantize a
rlx: quantize: too many arguments*|quantize a b Q8_0 d
rlx: quantize: -t 0 is out of range*|quantize a b Q8_0 -t 0
rlx: quantize: -t $over is out of range*|quantize a b Q8_0 -t $over
rlx: quantize: unknown type 'Q9'*|quantize a b Q9
rlx: make-model: unknown option '--bogus' (see rlx make-model --help)|make-model --bogus 1
rlx: make-model: unexpected argument 'stray'*|make-model stray
rlx: make-model: --out needs a value (see rlx make-model --help)|make-model --shape tiny --out
rlx: make-model: -t 0 is out of range*|make-model -t 0
rlx: make-model: no --shape (see rlx make-model --help)|make-model --out m.gguf
rlx: perplexity: unknown option '--bogus' (see rlx perplexity --help)|perplexity -m x --bogus
rlx: perplexity: -t 0 is out of range*|perplexity -m x -f y -t 0
rlx: perplexity: no text; use -f TEXT_FILE*|perplexity -m x
rlx: bench: unknown option '--bogus' (see rlx bench --help)|bench -m x --bogus
rlx: bench: no benchmark 'foo'*(see rlx bench --help)|bench foo
rlx: bench: no model; use -m MODEL.gguf (see rlx bench --help)|bench
rlx: bench: -t 0 is out of range*|bench -m x -t 0
rlx: bench: -p wants a number of prompt tokens >= 1, not '0'|bench -m x -p 0
rlx: bench: --unfused is for a CUDA device (--device cuda:N)|bench -m x --unfused
rlx: bench: --plain-matvec is for a CUDA device (--device cuda:N)|bench -m x --plain-matvec
rlx: bench ops: unknown option '--bogus' (see rlx bench ops --help)|bench ops --bogus
rlx: bench sam: -m MODEL is required (see rlx bench sam --help)|bench sam
rlx: bench sam: unknown option '--bogus' (see rlx bench sam --help)|bench sam -m x --bogus
rlx: bench sam: -r must be 1 to 100, not '0'|bench sam -m x -r 0
rlx: bench sam: -t $over is out of range*|bench sam -m x -t $over
rlx: bench ops: -t $over is out of range*|bench ops -t $over
rlx: bench ops: -r wants a repetition count from 1 to 1000, not '0'|bench ops -r 0
TABLE

exit $fail
