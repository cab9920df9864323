/* libFuzzer target: audio files of arbitrary bytes through rlx_audio_open,
 * read (with resampling) and seek. libsndfile and its decoders do the
 * parsing; this checks that whatever they accept or refuse, our side (header
 * checks, mixing, the resampler loop, seeking) stays in bounds and every
 * refusal carries a sentence. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/audio/audio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-audio", 0);
    if (fd < 0)
        return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    rlx_audio_reader *r = NULL;
    rlx_error *err = NULL;
    /* 16 kHz as Whisper reads, resampling whenever the file says another rate */
    if (rlx_audio_open(path, 16000, &r, &err) != RLX_OK) {
        if (!err || rlx_error_message(err)[0] == '\0' || r)
            __builtin_trap();
        rlx_error_free(err);
        close(fd);
        return 0;
    }
    static float buf[4096];
    int64_t total = 0, k;
    /* bounded: a hostile header may claim hours */
    while (total < 200000 && (k = rlx_audio_read(r, buf, 4096, &err)) > 0) {
        if (k > 4096)
            __builtin_trap();
        total += k;
    }
    rlx_error_clear(&err);
    if (rlx_audio_seek(r, total / 2, &err) == RLX_OK)
        rlx_audio_read(r, buf, 4096, &err);
    rlx_error_clear(&err);
    rlx_audio_close(r);
    close(fd);
    return 0;
}
