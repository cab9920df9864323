/* Audio file reading: libsndfile decodes, we average channels to mono and
 * stream the result through libsamplerate, one window at a time. */
#include "engine/audio/audio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <samplerate.h>
#include <sndfile.h>

/* Frames decoded per window: small enough to stay in cache, large enough
 * that per-call overhead in libsndfile and libsamplerate does not show. */
#define BLOCK 4096

/* Whisper-grade quality at a fraction of SRC_SINC_BEST_QUALITY's cost:
 * 97 dB of stop-band attenuation, 90% of the band kept. */
#define SRC_QUALITY SRC_SINC_MEDIUM_QUALITY

/* How far before a seek target (in zero crossings of the resampler's filter)
 * reading restarts, so that the discarded overlap covers the filter's history
 * and the samples after it equal a straight read. libsamplerate's medium
 * filter is far shorter than this. */
#define SEEK_LEAD_CROSSINGS 512

struct rlx_audio_reader {
    SNDFILE *sf;
    rlx_audio_info info;
    char *path;
    int out_rate;
    SRC_STATE *src; /* NULL when the file is already at out_rate */
    double ratio;   /* out_rate / file rate */
    float *ibuf;    /* BLOCK * channels interleaved frames */
    float *mono;    /* BLOCK mixed frames, [mono_pos, mono_len) not yet used */
    int64_t mono_pos, mono_len;
    bool eof;        /* libsndfile has given everything */
    bool done;       /* and the resampler is flushed */
    bool failed;     /* a decoding error: only close is meaningful now */
    bool broken;     /* the decoder hit damage: reading fails once the rest is used */
    int64_t decoded; /* frames decoded since the last seek (for messages) */
};

static const char *format_name(int format)
{
    int sub = format & SF_FORMAT_SUBMASK;
    switch (format & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV:
    case SF_FORMAT_WAVEX:
        return "WAV";
    case SF_FORMAT_RF64:
        return "RF64";
    case SF_FORMAT_W64:
        return "W64";
    case SF_FORMAT_AIFF:
        return "AIFF";
    case SF_FORMAT_AU:
        return "AU";
    case SF_FORMAT_CAF:
        return "CAF";
    case SF_FORMAT_FLAC:
        return "FLAC";
    case SF_FORMAT_OGG:
        if (sub == SF_FORMAT_VORBIS)
            return "OGG/Vorbis";
        if (sub == SF_FORMAT_OPUS)
            return "OGG/Opus";
        return "OGG";
    case SF_FORMAT_MPEG:
        if (sub == SF_FORMAT_MPEG_LAYER_III)
            return "MP3";
        return "MPEG audio";
    default:
        return "audio";
    }
}

/* The sentence for a file whose decoder hit damage after r->decoded frames. */
static void report_broken(rlx_audio_reader *r, rlx_error **err)
{
    r->failed = true;
    if (r->decoded == 0)
        rlx_error_set(err, RLX_ERR_FORMAT, "%s is corrupt: none of its audio could be decoded.",
                      r->path);
    else
        rlx_error_set(err, RLX_ERR_FORMAT,
                      "%s is corrupt: its audio could not be decoded past %.2f s.", r->path,
                      (double)r->decoded / r->info.sample_rate);
}

/* Decodes the next window into r->mono and returns its frame count. 0 means
 * the end (r->eof) or damage (r->broken: the frames before it were handed out
 * by earlier calls, and the caller reports it once those are used). */
static int64_t refill(rlx_audio_reader *r)
{
    int ch = r->info.channels;
    r->mono_pos = r->mono_len = 0;
    if (r->broken)
        return 0;
    sf_count_t k = sf_readf_float(r->sf, r->ibuf, BLOCK);
    if (k < 0 || k > BLOCK) {
        r->broken = true;
        return 0;
    }
    /* a short read with the error flag set: damage, not the end */
    if (k < BLOCK && sf_error(r->sf) != SF_ERR_NO_ERROR)
        r->broken = true;
    if (ch == 1) {
        memcpy(r->mono, r->ibuf, (size_t)k * sizeof(float));
    } else {
        float inv = 1.0f / (float)ch;
        for (sf_count_t i = 0; i < k; i++) {
            float s = 0.0f;
            for (int c = 0; c < ch; c++)
                s += r->ibuf[i * ch + c];
            r->mono[i] = s * inv;
        }
    }
    /* A decoder may hand back NaN or infinities from a damaged stream; they
     * would poison every mel frame they touch. */
    for (sf_count_t i = 0; i < k; i++)
        if (!isfinite(r->mono[i]))
            r->mono[i] = 0.0f;
    r->mono_pos = 0;
    r->mono_len = k;
    r->decoded += k;
    if (k == 0 && !r->broken)
        r->eof = true;
    return k;
}

static rlx_status open_error_for_path(const char *path, rlx_error **err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return rlx_error_set(err, RLX_ERR_IO, "Cannot open %s: %s.", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return rlx_error_set(err, RLX_ERR_IO, "%s is a folder, not an audio file.", path);
    if (!S_ISREG(st.st_mode))
        return rlx_error_set(err, RLX_ERR_IO, "%s is not a regular file.", path);
    if (st.st_size == 0)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s is empty (0 bytes): it holds no audio.",
                             path);
    return RLX_OK;
}

rlx_status rlx_audio_open(const char *path, int out_rate, rlx_audio_reader **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_audio_open needs a path and an out.");
    if (out_rate < RLX_AUDIO_MIN_RATE || out_rate > RLX_AUDIO_MAX_RATE)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "An output sample rate of %d Hz was asked for; it must be between "
                             "%d and %d Hz.",
                             out_rate, RLX_AUDIO_MIN_RATE, RLX_AUDIO_MAX_RATE);
    rlx_status st = open_error_for_path(path, err);
    if (st != RLX_OK)
        return st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rlx_error_set(err, RLX_ERR_IO, "Cannot open %s: %s.", path, strerror(errno));

    rlx_audio_reader *r = calloc(1, sizeof *r);
    if (!r) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory opening %s.", path);
    }
    r->out_rate = out_rate;
    r->path = strdup(path);
    SF_INFO si;
    memset(&si, 0, sizeof si);
    /* libsndfile closes fd when sf_close()s it, and also when sf_open_fd fails. */
    r->sf = sf_open_fd(fd, SFM_READ, &si, SF_TRUE);
    if (!r->sf) {
        /* libsndfile's own text for other codes can mislead ("possibly a pipe?") */
        int code = sf_error(NULL);
        const char *why = code == SF_ERR_UNRECOGNISED_FORMAT    ? " (the format is not recognised)"
                          : code == SF_ERR_MALFORMED_FILE       ? " (it is malformed)"
                          : code == SF_ERR_UNSUPPORTED_ENCODING ? " (its encoding is not supported)"
                                                                : "";
        st = rlx_error_set(err, RLX_ERR_FORMAT,
                           "%s is not an audio file this program can read (WAV, FLAC, "
                           "OGG/Vorbis, Opus or MP3), or it is corrupt%s.",
                           path, why);
        rlx_audio_close(r);
        return st;
    }
    if (!r->path) {
        rlx_audio_close(r);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory opening %s.", path);
    }
    if (si.channels < 1 || si.channels > RLX_AUDIO_MAX_CHANNELS) {
        st = rlx_error_set(err, RLX_ERR_FORMAT,
                           "%s claims %d channels; this program reads 1 to %d, so the header is "
                           "probably broken.",
                           path, si.channels, RLX_AUDIO_MAX_CHANNELS);
        rlx_audio_close(r);
        return st;
    }
    if (si.samplerate < RLX_AUDIO_MIN_RATE || si.samplerate > RLX_AUDIO_MAX_RATE) {
        st = rlx_error_set(err, RLX_ERR_FORMAT,
                           "%s claims a sample rate of %d Hz; recordings use %d Hz to %d kHz, so "
                           "the header is probably broken.",
                           path, si.samplerate, RLX_AUDIO_MIN_RATE, RLX_AUDIO_MAX_RATE / 1000);
        rlx_audio_close(r);
        return st;
    }
    r->info.frames = si.frames == SF_COUNT_MAX ? -1 : (int64_t)si.frames;
    r->info.sample_rate = si.samplerate;
    r->info.channels = si.channels;
    r->info.seconds = r->info.frames > 0 ? (double)r->info.frames / si.samplerate : 0.0;
    snprintf(r->info.format, sizeof r->info.format, "%s", format_name(si.format));

    r->ibuf = malloc((size_t)BLOCK * (size_t)si.channels * sizeof(float));
    r->mono = malloc((size_t)BLOCK * sizeof(float));
    if (!r->ibuf || !r->mono) {
        rlx_audio_close(r);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory opening %s.", path);
    }
    if (si.samplerate != out_rate) {
        int e = 0;
        r->ratio = (double)out_rate / (double)si.samplerate;
        r->src = src_new(SRC_QUALITY, 1, &e);
        if (!r->src) {
            st = rlx_error_set(err, RLX_ERR_INTERNAL, "The resampler could not start for %s: %s.",
                               path, src_strerror(e));
            rlx_audio_close(r);
            return st;
        }
    } else {
        r->ratio = 1.0;
    }
    if (r->info.frames == 0) {
        rlx_audio_close(r);
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s holds no audio samples.", path);
    }
    /* Decode the first window now, so a file that opens but does not decode
     * (a damaged MP3) fails here, where the caller expects it. */
    int64_t k = refill(r);
    if (k == 0 && r->broken) {
        report_broken(r, err);
        rlx_audio_close(r);
        return RLX_ERR_FORMAT;
    }
    if (k == 0) {
        rlx_audio_close(r);
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s holds no audio samples.", path);
    }
    *out = r;
    return RLX_OK;
}

const rlx_audio_info *rlx_audio_reader_info(const rlx_audio_reader *r)
{
    return r ? &r->info : NULL;
}

int64_t rlx_audio_reader_length(const rlx_audio_reader *r)
{
    if (!r || r->info.frames < 0)
        return -1;
    if (!r->src)
        return r->info.frames;
    /* ceil(frames * out / in) in integers: frames < 2^63 / 384000 for any real file */
    int64_t in = r->info.sample_rate, o = r->out_rate;
    if (r->info.frames > INT64_MAX / o)
        return (int64_t)ceil((double)r->info.frames * r->ratio);
    return (r->info.frames * o + in - 1) / in;
}

int64_t rlx_audio_read(rlx_audio_reader *r, float *dst, int64_t n, rlx_error **err)
{
    if (!r || (!dst && n > 0) || n < 0) {
        rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_audio_read needs a reader and a buffer.");
        return -1;
    }
    if (r->failed) {
        rlx_error_set(err, RLX_ERR_FORMAT, "%s could not be decoded earlier; reopen it.", r->path);
        return -1;
    }
    int64_t got = 0;
    while (got < n && !r->done) {
        if (r->mono_pos == r->mono_len && !r->eof && refill(r) == 0 && r->broken) {
            /* hand out what this call has; the next call reports the damage */
            if (got > 0)
                break;
            report_broken(r, err);
            return -1;
        }
        int64_t avail = r->mono_len - r->mono_pos;
        if (!r->src) {
            if (avail == 0) {
                r->done = true;
                break;
            }
            int64_t take = avail < n - got ? avail : n - got;
            memcpy(dst + got, r->mono + r->mono_pos, (size_t)take * sizeof(float));
            r->mono_pos += take;
            got += take;
            continue;
        }
        SRC_DATA d;
        memset(&d, 0, sizeof d);
        d.data_in = r->mono + r->mono_pos;
        d.input_frames = (long)avail;
        d.data_out = dst + got;
        /* long is 64-bit here, but keep each call to a sane window anyway */
        int64_t want = n - got;
        d.output_frames = (long)(want < (1 << 24) ? want : (1 << 24));
        d.end_of_input = r->eof ? 1 : 0;
        d.src_ratio = r->ratio;
        int e = src_process(r->src, &d);
        if (e != 0) {
            r->failed = true;
            rlx_error_set(err, RLX_ERR_INTERNAL, "Resampling %s failed: %s.", r->path,
                          src_strerror(e));
            return -1;
        }
        r->mono_pos += d.input_frames_used;
        got += d.output_frames_gen;
        if (d.output_frames_gen == 0 && d.input_frames_used == 0) {
            if (r->eof)
                r->done = true; /* flushed */
            else if (avail > 0) {
                r->failed = true;
                rlx_error_set(err, RLX_ERR_INTERNAL, "The resampler stopped making progress on %s.",
                              r->path);
                return -1;
            }
        }
    }
    return got;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static rlx_status seek_file(rlx_audio_reader *r, int64_t frame, rlx_error **err)
{
    if (sf_seek(r->sf, (sf_count_t)frame, SEEK_SET) < 0) {
        r->failed = true;
        return rlx_error_set(err, RLX_ERR_IO, "Cannot seek to %.2f s in %s: %s.",
                             (double)frame / r->info.sample_rate, r->path, sf_strerror(r->sf));
    }
    r->mono_pos = r->mono_len = 0;
    r->eof = r->done = false;
    r->broken = false;
    r->decoded = frame;
    return RLX_OK;
}

rlx_status rlx_audio_seek(rlx_audio_reader *r, int64_t sample, rlx_error **err)
{
    if (!r || sample < 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_audio_seek needs a reader and a position of 0 or more.");
    if (r->failed)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s could not be decoded earlier; reopen it.",
                             r->path);
    int64_t len = rlx_audio_reader_length(r);
    if (len >= 0 && sample >= len) {
        /* at the end: nothing more to read */
        r->mono_pos = r->mono_len = 0;
        r->eof = r->done = true;
        return RLX_OK;
    }
    if (!r->src)
        return seek_file(r, sample, err);

    /* Restart at an output sample s0 whose input time is a whole frame f0
     * (s0 a multiple of out/g, f0 of in/g), far enough before the target that
     * the filter's history is all real input, then discard up to the target. */
    int64_t in = r->info.sample_rate, o = r->out_rate;
    int64_t g = gcd64(in, o);
    int64_t pout = o / g, pin = in / g;
    double stretch = r->ratio < 1.0 ? 1.0 / r->ratio : 1.0;
    int64_t lead_in = (int64_t)(SEEK_LEAD_CROSSINGS * stretch) + 1;
    int64_t lead_out = (int64_t)ceil((double)lead_in * r->ratio);
    int64_t s0 = sample - lead_out;
    s0 = s0 <= 0 ? 0 : (s0 / pout) * pout;
    int64_t f0 = s0 / pout * pin;
    rlx_status st = seek_file(r, f0, err);
    if (st != RLX_OK)
        return st;
    src_reset(r->src);
    float scratch[1024];
    int64_t skip = sample - s0;
    while (skip > 0) {
        int64_t want = skip < 1024 ? skip : 1024;
        int64_t k = rlx_audio_read(r, scratch, want, err);
        if (k < 0)
            return err && *err ? rlx_error_code(*err) : RLX_ERR_FORMAT;
        if (k == 0)
            break;
        skip -= k;
    }
    return RLX_OK;
}

void rlx_audio_close(rlx_audio_reader *r)
{
    if (!r)
        return;
    if (r->sf)
        sf_close(r->sf);
    if (r->src)
        src_delete(r->src);
    free(r->ibuf);
    free(r->mono);
    free(r->path);
    free(r);
}

rlx_status rlx_audio_load(const char *path, int out_rate, float **samples, int64_t *n,
                          rlx_error **err)
{
    if (samples)
        *samples = NULL;
    if (n)
        *n = 0;
    if (!samples || !n)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_audio_load needs samples and n.");
    rlx_audio_reader *r = NULL;
    rlx_status st = rlx_audio_open(path, out_rate, &r, err);
    if (st != RLX_OK)
        return st;
    int64_t cap = rlx_audio_reader_length(r);
    /* the length is an estimate for some formats: start near it, grow as needed */
    cap = cap > 0 && cap < ((int64_t)1 << 32) ? cap + BLOCK : (int64_t)1 << 20;
    float *x = malloc((size_t)cap * sizeof(float));
    int64_t len = 0;
    while (x) {
        if (len == cap) {
            if (cap > ((int64_t)1 << 40)) {
                free(x);
                x = NULL;
                break;
            }
            float *nx = realloc(x, (size_t)(cap * 2) * sizeof(float));
            if (!nx) {
                free(x);
                x = NULL;
                break;
            }
            x = nx;
            cap *= 2;
        }
        int64_t k = rlx_audio_read(r, x + len, cap - len, err);
        if (k < 0) {
            free(x);
            rlx_audio_close(r);
            return err && *err ? rlx_error_code(*err) : RLX_ERR_FORMAT;
        }
        if (k == 0)
            break;
        len += k;
    }
    rlx_audio_close(r);
    if (!x)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY,
                             "Out of memory holding the samples of %s in memory.", path);
    if (len == 0) {
        free(x);
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s holds no audio samples.", path);
    }
    *samples = x;
    *n = len;
    return RLX_OK;
}

rlx_status rlx_audio_write_wav(const char *path, const float *x, int64_t n, int rate,
                               rlx_error **err)
{
    if (!path || n < 0 || (!x && n > 0))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_audio_write_wav needs a path and samples.");
    if (rate < RLX_AUDIO_MIN_RATE || rate > RLX_AUDIO_MAX_RATE)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "Cannot write %s at %d Hz: the rate must be between %d and %d Hz.",
                             path, rate, RLX_AUDIO_MIN_RATE, RLX_AUDIO_MAX_RATE);
    /* a 16-bit WAV's data chunk is limited to 4 GiB */
    if (n > (int64_t)(UINT32_MAX / 2 - 64))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "Cannot write %s: %lld samples do not fit a WAV file.", path,
                             (long long)n);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return rlx_error_set(err, RLX_ERR_IO, "Cannot write %s: %s.", path, strerror(errno));
    /* only a regular file we wrote is removed after a failure, never a device */
    struct stat fst;
    bool regular = fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode);
    SF_INFO si;
    memset(&si, 0, sizeof si);
    si.samplerate = rate;
    si.channels = 1;
    si.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    SNDFILE *sf = sf_open_fd(fd, SFM_WRITE, &si, SF_TRUE);
    if (!sf) {
        rlx_status st = rlx_error_set(err, RLX_ERR_IO, "Cannot write %s: %s.", path,
                                      sf_error_number(sf_error(NULL)));
        if (regular)
            unlink(path);
        return st;
    }
    /* Our own conversion (x * 32768, rounded, clipped) so that reading the
     * file back (libsndfile divides by 32768) returns x to within 2^-16. */
    short buf[BLOCK];
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i += BLOCK) {
        int64_t k = n - i < BLOCK ? n - i : BLOCK;
        for (int64_t j = 0; j < k; j++) {
            float v = x[i + j];
            long q = isfinite(v) ? lrintf(fminf(fmaxf(v, -1.0f), 1.0f) * 32768.0f) : 0;
            buf[j] = (short)(q > 32767 ? 32767 : q);
        }
        ok = sf_write_short(sf, buf, (sf_count_t)k) == (sf_count_t)k;
    }
    if (sf_error(sf) != SF_ERR_NO_ERROR)
        ok = false;
    char why[256];
    snprintf(why, sizeof why, "%s", sf_strerror(sf));
    /* libsndfile rewrites the header at close and does not always report a
     * failed write(2) (a full disk): flush ourselves and ask the kernel */
    sf_write_sync(sf);
    int fd2 = dup(fd);
    if (sf_close(sf) != 0)
        ok = false;
    if (fd2 >= 0) {
        if (regular) {
            struct stat after;
            int64_t want = 44 + 2 * n;
            if (fstat(fd2, &after) != 0 || (int64_t)after.st_size < want) {
                ok = false;
                snprintf(why, sizeof why, "the file came out short (is the disk full?)");
            }
            if (fsync(fd2) != 0 && errno != EINVAL) {
                ok = false;
                snprintf(why, sizeof why, "%s", strerror(errno));
            }
        }
        close(fd2);
    }
    if (!ok) {
        if (regular)
            unlink(path);
        return rlx_error_set(err, RLX_ERR_IO, "Writing %s failed: %s.", path, why);
    }
    return RLX_OK;
}
