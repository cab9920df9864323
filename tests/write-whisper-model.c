/* write-whisper-model SRC OUT [v3]: the random-weight whisper-tiny of
 * tests/whisper-writer.h as a ggml F16 file at OUT, with the header,
 * filterbank and vocabulary of SRC (for-tests-ggml-tiny.bin); with "v3",
 * the rlx_ww_v3 layout instead (large-v3's 128 mels and 51,866-token
 * vocabulary at small widths; needs tests/fixtures/mel-filters-128-ref.f32).
 * For the shell tests of `rlx transcribe`. Exit 0, or 1 with a sentence on
 * stderr. */
#include <stdio.h>
#include <string.h>

#include "whisper-writer.h"

int main(int argc, char **argv)
{
    if ((argc != 3 && argc != 4) || (argc == 4 && strcmp(argv[3], "v3") != 0)) {
        fprintf(stderr, "usage: write-whisper-model for-tests-ggml-tiny.bin OUT.bin [v3]\n");
        return 1;
    }
    rlx_error *err = NULL;
    const rlx_ww_config *c = argc == 4 ? &rlx_ww_v3 : &rlx_ww_tiny;
    if (rlx_ww_write_ggml(c, argv[1], argv[2], true, &err) != RLX_OK) {
        fprintf(stderr, "write-whisper-model: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return 1;
    }
    return 0;
}
