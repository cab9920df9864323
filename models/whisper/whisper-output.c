/* Transcripts as text, SubRip (SRT), WebVTT and JSON. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <json-c/json.h>

#include "models/whisper/whisper.h"

int rlx_whisper_format_from_path(const char *path)
{
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot)
        return -1;
    static const char *const ext[] = {".txt", ".srt", ".vtt", ".json"};
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(dot, ext[i]))
            return i;
    return -1;
}

char *rlx_whisper_format_time(int64_t ms, bool comma, char *buf, size_t cap)
{
    if (ms < 0)
        ms = 0;
    snprintf(buf, cap, "%02lld:%02lld:%02lld%c%03lld", (long long)(ms / 3600000),
             (long long)(ms / 60000 % 60), (long long)(ms / 1000 % 60), comma ? ',' : '.',
             (long long)(ms % 1000));
    return buf;
}

/* The segment text without its leading spaces and line breaks (Whisper's
 * tokens carry a space; a cue must not start with an empty line). */
static const char *trimmed(const char *s)
{
    while (*s == ' ' || *s == '\n' || *s == '\r')
        s++;
    return s;
}

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 when it is not
 * one: a segment boundary can split a character across two segments, as
 * Whisper's byte-level tokens allow, and JSON, SRT and VTT must be UTF-8. */
static int utf8_len(const unsigned char *s)
{
    int n;
    if (s[0] < 0x80)
        return 1;
    else if (s[0] >= 0xC2 && s[0] <= 0xDF)
        n = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        n = 3;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        n = 4;
    else
        return 0;
    /* stops at the terminating NUL, which is no continuation byte */
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    /* overlong, surrogate and out-of-range forms */
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0)))
        return 0;
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
        return 0;
    return n;
}

/* A malloc'd copy of s with every invalid UTF-8 byte replaced by U+FFFD
 * (Python's errors="replace", which openai-whisper decodes with), and
 * carriage returns dropped. NULL when out of memory. */
static char *valid_utf8(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(3 * n + 1), *p = o;
    if (!o)
        return NULL;
    for (const unsigned char *u = (const unsigned char *)s; *u;) {
        int l = utf8_len(u);
        if (*u == '\r') {
            u++;
        } else if (l == 0) {
            memcpy(p, "\xEF\xBF\xBD", 3);
            p += 3;
            u++;
        } else {
            memcpy(p, u, (size_t)l);
            p += l;
            u += l;
        }
    }
    *p = 0;
    return o;
}

/* SRT and VTT cues end at a blank line, so a line break inside a segment's
 * text must not leave an empty line; and VTT reserves "-->". */
static void put_cue_text(FILE *f, const char *s, bool vtt)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
        n--;
    bool nl = false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n') {
            if (!nl)
                fputc('\n', f);
            nl = true;
            /* a line of spaces only would read as the cue's end too */
            while (i + 1 < n && s[i + 1] == ' ')
                i++;
            continue;
        }
        nl = false;
        if (vtt && s[i] == '-' && i + 2 < n && s[i + 1] == '-' && s[i + 2] == '>') {
            fputs("--&gt;", f);
            i += 2;
        } else if (vtt && s[i] == '&') {
            fputs("&amp;", f);
        } else if (vtt && s[i] == '<') {
            fputs("&lt;", f);
        } else {
            fputc(s[i], f);
        }
    }
}

/* Seconds with the milliseconds exact ("1.5", "62.345"), not 1.5000000000000001. */
static json_object *json_seconds(int64_t ms)
{
    char b[32];
    snprintf(b, sizeof b, "%s%lld.%03lld", ms < 0 ? "-" : "", (long long)(llabs(ms) / 1000),
             (long long)(llabs(ms) % 1000));
    /* trim the fraction's trailing zeros, keeping one digit */
    size_t n = strlen(b);
    while (n > 0 && b[n - 1] == '0' && b[n - 2] != '.')
        b[--n] = 0;
    return json_object_new_double_s((double)ms / 1000.0, b);
}

/* A float probability as the shortest decimal that reads back as the same float. */
static json_object *json_float(float v)
{
    char b[32];
    if (!isfinite(v))
        return NULL; /* JSON has no infinities: null */
    snprintf(b, sizeof b, "%.9g", (double)v);
    for (int prec = 1; prec <= 9; prec++) {
        char t[32];
        snprintf(t, sizeof t, "%.*g", prec, (double)v);
        if (strtof(t, NULL) == v) {
            memcpy(b, t, sizeof t);
            break;
        }
    }
    return json_object_new_double_s((double)v, b);
}

static json_object *json_text(const char *s)
{
    char *v = valid_utf8(s ? s : "");
    json_object *o = json_object_new_string(v ? v : "");
    free(v);
    return o;
}

static json_object *result_json(const rlx_whisper_result *r)
{
    json_object *root = json_object_new_object();
    json_object_object_add(root, "language", json_text(r->language));
    json_object_object_add(root, "language_probability", json_float(r->language_p));
    json_object *segs = json_object_new_array();
    for (int i = 0; i < r->n_segments; i++) {
        const rlx_whisper_segment *s = &r->segments[i];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_int(s->index));
        json_object_object_add(o, "start", json_seconds(s->t0_ms));
        json_object_object_add(o, "end", json_seconds(s->t1_ms));
        json_object_object_add(o, "text", json_text(s->text));
        json_object *toks = json_object_new_array();
        for (int k = 0; k < s->n_tokens; k++) {
            json_object *t = json_object_new_object();
            json_object_object_add(t, "id", json_object_new_int(s->tokens[k].id));
            json_object_object_add(t, "p", json_float(s->tokens[k].p));
            json_object_array_add(toks, t);
        }
        json_object_object_add(o, "tokens", toks);
        if (s->n_words > 0) {
            json_object *words = json_object_new_array();
            for (int k = 0; k < s->n_words; k++) {
                json_object *wd = json_object_new_object();
                json_object_object_add(wd, "word", json_text(s->words[k].text));
                json_object_object_add(wd, "start", json_seconds(s->words[k].t0_ms));
                json_object_object_add(wd, "end", json_seconds(s->words[k].t1_ms));
                json_object_object_add(wd, "probability", json_float(s->words[k].p));
                json_object_array_add(words, wd);
            }
            json_object_object_add(o, "words", words);
        }
        json_object_object_add(o, "avg_logprob", json_float(s->avg_logprob));
        json_object_object_add(o, "no_speech_prob", json_float(s->no_speech_prob));
        json_object_object_add(o, "temperature", json_float(s->temperature));
        json_object_object_add(o, "compression_ratio", json_float(s->compression_ratio));
        json_object_array_add(segs, o);
    }
    json_object_object_add(root, "segments", segs);
    return root;
}

rlx_status rlx_whisper_write(const rlx_whisper_result *r, rlx_whisper_format fmt, FILE *f,
                             rlx_error **err)
{
    char a[32], b[32];
    if (fmt == RLX_WHISPER_JSON) {
        json_object *root = result_json(r);
        fputs(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                       JSON_C_TO_STRING_NOSLASHESCAPE),
              f);
        fputc('\n', f);
        json_object_put(root);
    } else if (fmt == RLX_WHISPER_TXT || fmt == RLX_WHISPER_SRT || fmt == RLX_WHISPER_VTT) {
        if (fmt == RLX_WHISPER_VTT)
            fputs("WEBVTT\n\n", f);
        int cue = 0;
        for (int i = 0; i < r->n_segments; i++) {
            const rlx_whisper_segment *s = &r->segments[i];
            char *text = valid_utf8(s->text ? s->text : "");
            if (!text)
                return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            const char *t = trimmed(text);
            if (fmt == RLX_WHISPER_TXT) {
                fprintf(f, "%s\n", t);
            } else if (*t) { /* a cue without text would read as the end of the file */
                bool srt = fmt == RLX_WHISPER_SRT;
                if (srt)
                    fprintf(f, "%d\n", ++cue);
                fprintf(f, "%s --> %s\n", rlx_whisper_format_time(s->t0_ms, srt, a, 32),
                        rlx_whisper_format_time(s->t1_ms, srt, b, 32));
                put_cue_text(f, t, !srt);
                fputs("\n\n", f);
            }
            free(text);
        }
    } else {
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "unknown transcript format %d", (int)fmt);
    }
    if (fflush(f) != 0 || ferror(f))
        return rlx_error_set(err, RLX_ERR_IO, "the transcript could not be written: %s",
                             strerror(errno));
    return RLX_OK;
}

rlx_status rlx_whisper_save(const rlx_whisper_result *r, rlx_whisper_format fmt, const char *path,
                            rlx_error **err)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    snprintf(tmp, n + 16, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        rlx_status st =
            rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        free(tmp);
        return st;
    }
    rlx_status st = rlx_whisper_write(r, fmt, f, err);
    if (st != RLX_OK)
        rlx_error_prefix(err, "%s: ", path);
    if (fclose(f) != 0 && st == RLX_OK)
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (st == RLX_OK && rename(tmp, path) != 0)
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (st != RLX_OK)
        unlink(tmp); /* an existing file at path stays as it was */
    free(tmp);
    return st;
}
