/* write-whisper-model SRC OUT: the random-weight whisper-tiny of
 * tests/whisper-writer.h as a ggml F16 file at OUT, with the header,
 * filterbank and vocabulary of SRC (for-tests-ggml-tiny.bin). For the shell
 * tests of `rlx transcribe`. Exit 0, or 1 with a sentence on stderr. */
#include <stdio.h>

#include "whisper-writer.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: write-whisper-model for-tests-ggml-tiny.bin OUT.bin\n");
        return 1;
    }
    rlx_error *err = NULL;
    if (rlx_whisper_writer_ggml(argv[1], argv[2], true, &err) != RLX_OK) {
        fprintf(stderr, "write-whisper-model: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return 1;
    }
    return 0;
}
