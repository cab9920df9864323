/* Transcripts as text, SubRip (SRT), WebVTT and JSON. */
#include <errno.h>
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

/* The segment text without its leading space (Whisper's tokens carry it). */
static const char *trimmed(const char *s)
{
    while (*s == ' ')
        s++;
    return s;
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

static json_object *result_json(const rlx_whisper_result *r)
{
    json_object *root = json_object_new_object();
    json_object_object_add(root, "language", json_object_new_string(r->language));
    json_object_object_add(root, "language_probability", json_object_new_double(r->language_p));
    json_object *segs = json_object_new_array();
    for (int i = 0; i < r->n_segments; i++) {
        const rlx_whisper_segment *s = &r->segments[i];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_int(s->index));
        json_object_object_add(o, "start", json_object_new_double(s->t0_ms / 1000.0));
        json_object_object_add(o, "end", json_object_new_double(s->t1_ms / 1000.0));
        json_object_object_add(o, "text", json_object_new_string(s->text));
        json_object *toks = json_object_new_array();
        for (int k = 0; k < s->n_tokens; k++) {
            json_object *t = json_object_new_object();
            json_object_object_add(t, "id", json_object_new_int(s->tokens[k].id));
            json_object_object_add(t, "p", json_object_new_double(s->tokens[k].p));
            json_object_array_add(toks, t);
        }
        json_object_object_add(o, "tokens", toks);
        if (s->n_words > 0) {
            json_object *words = json_object_new_array();
            for (int k = 0; k < s->n_words; k++) {
                json_object *wd = json_object_new_object();
                json_object_object_add(wd, "word", json_object_new_string(s->words[k].text));
                json_object_object_add(wd, "start",
                                       json_object_new_double(s->words[k].t0_ms / 1000.0));
                json_object_object_add(wd, "end",
                                       json_object_new_double(s->words[k].t1_ms / 1000.0));
                json_object_object_add(wd, "probability", json_object_new_double(s->words[k].p));
                json_object_array_add(words, wd);
            }
            json_object_object_add(o, "words", words);
        }
        json_object_object_add(o, "avg_logprob", json_object_new_double(s->avg_logprob));
        json_object_object_add(o, "no_speech_prob", json_object_new_double(s->no_speech_prob));
        json_object_object_add(o, "temperature", json_object_new_double(s->temperature));
        json_object_object_add(o, "compression_ratio",
                               json_object_new_double(s->compression_ratio));
        json_object_array_add(segs, o);
    }
    json_object_object_add(root, "segments", segs);
    return root;
}

rlx_status rlx_whisper_write(const rlx_whisper_result *r, rlx_whisper_format fmt, FILE *f,
                             rlx_error **err)
{
    char a[32], b[32];
    switch (fmt) {
    case RLX_WHISPER_TXT:
        for (int i = 0; i < r->n_segments; i++)
            fprintf(f, "%s\n", trimmed(r->segments[i].text));
        break;
    case RLX_WHISPER_SRT:
        for (int i = 0; i < r->n_segments; i++) {
            const rlx_whisper_segment *s = &r->segments[i];
            fprintf(f, "%d\n%s --> %s\n", i + 1, rlx_whisper_format_time(s->t0_ms, true, a, 32),
                    rlx_whisper_format_time(s->t1_ms, true, b, 32));
            put_cue_text(f, trimmed(s->text), false);
            fputs("\n\n", f);
        }
        break;
    case RLX_WHISPER_VTT:
        fputs("WEBVTT\n\n", f);
        for (int i = 0; i < r->n_segments; i++) {
            const rlx_whisper_segment *s = &r->segments[i];
            fprintf(f, "%s --> %s\n", rlx_whisper_format_time(s->t0_ms, false, a, 32),
                    rlx_whisper_format_time(s->t1_ms, false, b, 32));
            put_cue_text(f, trimmed(s->text), true);
            fputs("\n\n", f);
        }
        break;
    case RLX_WHISPER_JSON: {
        json_object *root = result_json(r);
        fputs(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                       JSON_C_TO_STRING_NOSLASHESCAPE),
              f);
        fputc('\n', f);
        json_object_put(root);
        break;
    }
    default:
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
    if (fclose(f) != 0 && st == RLX_OK)
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (st == RLX_OK && rename(tmp, path) != 0)
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (st != RLX_OK) {
        unlink(tmp);
        rlx_error_prefix(err, "%s: ", path);
    }
    free(tmp);
    return st;
}
