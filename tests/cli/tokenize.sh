#!/bin/sh
# rlx tokenize on the real vocabularies: the three output forms, --special,
# and one-line errors with exit status 1.
set -u
rlx=$1
data=$2
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$data/README.md" "$data/llm/stories260K.gguf" "$data/tokenizers/ggml-vocab-llama-spm.gguf" "$data/tokenizers/ggml-vocab-qwen2.gguf" "$data/tokenizers/hf-qwen3"
fail=0
check() { # check DESCRIPTION COMMAND...
    desc=$1
    shift
    if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; fail=1; fi
}
stories="$data/llm/stories260K.gguf"
out=$("$rlx" tokenize -m "$stories" --ids "Once upon a time")
check "exit 0 on stories260K" [ $? -eq 0 ]
check "--ids: BOS then the four pieces" [ "$out" = "1 403 407 261 378" ]
out=$("$rlx" tokenize -m "$stories" "Once upon a time")
want=$(printf '1\t<s>\n403\t Once\n407\t upon\n261\t a\n378\t time')
check "default: id<TAB>piece per line" [ "$out" = "$want" ]
out=$("$rlx" tokenize -m "$stories" --no-bos --pieces "Once upon")
check "--pieces --no-bos" [ "$out" = "$(printf ' Once\n upon')" ]
qwen="$data/tokenizers/ggml-vocab-qwen2.gguf"
out=$("$rlx" tokenize -m "$qwen" --ids --special "<|im_start|>user")
check "--special parses control tokens" [ "$out" = "151644 872" ]
out=$("$rlx" tokenize -m "$qwen" --ids "<|im_start|>")
check "without --special they are text" [ "$out" != "151644" ]
out=$("$rlx" tokenize -m "$data/tokenizers/hf-qwen3" --ids "Hello world")
check "a tokenizer.json folder" [ "$out" = "9707 1879" ]
out=$("$rlx" tokenize -m "$data/tokenizers/ggml-vocab-llama-spm.gguf" --no-bos --pieces "$(printf 'a\360\237\246\231\nb')")
want=' a
\xF0
\x9F
\xA6
\x99
\n
b'
check "partial characters and newlines escaped" [ "$out" = "$want" ]
for args in "-m /nonexistent.gguf x" "-m $stories" "x" "-m $stories --bogus x" "-m $data/README.md x"; do
    # shellcheck disable=SC2086
    err=$("$rlx" tokenize $args 2>&1 >/dev/null)
    rc=$?
    check "exit 1 on '$args'" [ $rc -eq 1 ]
    check "one-line error on '$args'" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
done
exit $fail
