# Sourced by the shell tests that read ../shared/data.
#   rlx_need_data PATH...   exit 77 (meson's "skipped") with a sentence naming
#                           the first PATH that is absent
# The sentence starts as tests/test-util.h's RLX_TEST_DATA_MISSING does, the
# words .ci/run looks for: CI has the data, so there such a skip is a failure.
rlx_need_data() {
    for rlx_need_data_f in "$@"; do
        [ -e "$rlx_need_data_f" ] && continue
        echo "RLX-TEST-DATA-MISSING: $rlx_need_data_f is absent: this test reads the real files" \
            "of ../shared/data beside the checkout (see its README.md), so it is skipped"
        exit 77
    done
}
