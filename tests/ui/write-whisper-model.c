/* Writes the random-weight whisper-tiny of tests/whisper-writer.h as a
 * whisper.cpp ggml .bin, for tests/ui/transcribe.sh (random weights give
 * gibberish, but real segments through the real runner).
 *
 *   write-whisper-model HEADER_SRC OUT.bin
 *
 * HEADER_SRC: ../shared/data/whisper/for-tests-ggml-tiny.bin (its header,
 * filterbank and vocabulary). F16, as most whisper.cpp files are. */
#include "tests/whisper-writer.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: write-whisper-model HEADER_SRC OUT.bin\n");
        return 2;
    }
    rlx_error *err = NULL;
    if (rlx_whisper_writer_ggml(argv[1], argv[2], true, &err) != RLX_OK) {
        fprintf(stderr, "write-whisper-model: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return 1;
    }
    return 0;
}
