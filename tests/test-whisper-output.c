/* Transcript files (models/whisper/whisper-output.c): a hand-built result
 * written as TXT, SRT and VTT against the hand-written tests/fixtures/
 * whisper-out.{txt,srt,vtt} (SRT: numbered cues, comma times; VTT: the
 * header, dot times, "-->", "&" and "<" escaped; times past 99 minutes and
 * past 99 hours; a line break inside a text, a blank line inside a text and
 * a text starting with one, which must not end a cue; bytes that are not
 * UTF-8 as U+FFFD), JSON read back with json-c, the extension table,
 * the time format, and saving (atomic: a failure leaves the old file).
 */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "models/whisper/whisper.h"
#include "test-util.h"

#define N_SEG 5

static rlx_whisper_token toks[N_SEG][3] = {
    {{50364, 0.875f, -1, -1}, {400, 0.5f, -1, -1}, {50570, 0.25f, -1, -1}},
    {{1029, 0.125f, -1, -1}, {406, 1.0f, -1, -1}, {0, 0, 0, 0}},
    {{32, 0.0625f, -1, -1}, {0, 0, 0, 0}, {0, 0, 0, 0}},
    {{530, 0.3f, -1, -1}, {0, 0, 0, 0}, {0, 0, 0, 0}},
    {{7421, 0.999f, -1, -1}, {0, 0, 0, 0}, {0, 0, 0, 0}},
};

static char text0[] = " And so, my fellow Americans";
static char text1[] = " ask not\nwhat your country";
static char text2[] = " A --> B & C <i>";
static char text3[] = "\n one\n\ntwo";
static char text4[] = " caf\xC3 \xFF"; /* a character cut in two, and a stray byte */

static void build(rlx_whisper_result *r, rlx_whisper_segment *s)
{
    memset(r, 0, sizeof *r);
    memset(s, 0, sizeof *s * N_SEG);
    snprintf(r->language, sizeof r->language, "en");
    r->language_p = 0.96875f;
    const int64_t t[N_SEG][2] = {
        {0, 4120},          {4120, 61005},
        {5999000, 6012345},                         /* 99:59 and past 100 minutes */
        {6012345, 6013000}, {360000000, 360001001}, /* 100 hours */
    };
    char *texts[N_SEG] = {text0, text1, text2, text3, text4};
    const int nt[N_SEG] = {3, 2, 1, 1, 1};
    for (int i = 0; i < N_SEG; i++) {
        s[i].index = i;
        s[i].t0_ms = t[i][0];
        s[i].t1_ms = t[i][1];
        s[i].text = texts[i];
        s[i].n_tokens = nt[i];
        s[i].tokens = toks[i];
        s[i].avg_logprob = -0.25f * (float)(i + 1);
        s[i].no_speech_prob = 0.015625f * (float)i;
        s[i].temperature = i == 3 ? 0.2f : 0.0f;
        s[i].compression_ratio = 1.5f;
    }
    r->n_segments = N_SEG;
    r->segments = s;
}

static char *fixture(const char *name, size_t *n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", RLX_TEST_SOURCE_DIR, name);
    char *b = rlx_test_read_file(path, n);
    if (!b)
        fail_msg("%s is missing", path);
    return b;
}

/* rlx_whisper_write into memory */
static char *written(const rlx_whisper_result *r, rlx_whisper_format fmt, size_t *n)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    assert_non_null(f);
    rlx_error *err = NULL;
    if (rlx_whisper_write(r, fmt, f, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    fclose(f);
    return buf;
}

static void check_text_format(rlx_whisper_format fmt, const char *name)
{
    rlx_whisper_result r;
    rlx_whisper_segment s[N_SEG];
    build(&r, s);
    size_t n = 0, m = 0;
    char *got = written(&r, fmt, &n);
    char *want = fixture(name, &m);
    if (n != m || memcmp(got, want, n) != 0)
        fail_msg("%s differs; we wrote:\n%.*s", name, (int)n, got);
    free(got);
    free(want);
}

static void test_txt(void **state)
{
    (void)state;
    check_text_format(RLX_WHISPER_TXT, "whisper-out.txt");
}

static void test_srt(void **state)
{
    (void)state;
    check_text_format(RLX_WHISPER_SRT, "whisper-out.srt");
}

static void test_vtt(void **state)
{
    (void)state;
    check_text_format(RLX_WHISPER_VTT, "whisper-out.vtt");
}

static json_object *field(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("the JSON has no \"%s\"", key);
    return v;
}

static void test_json(void **state)
{
    (void)state;
    rlx_whisper_result r;
    rlx_whisper_segment s[N_SEG];
    build(&r, s);
    s[4].avg_logprob = -INFINITY; /* JSON has no infinities: null */
    size_t n = 0;
    char *got = written(&r, RLX_WHISPER_JSON, &n);
    json_tokener *tok = json_tokener_new();
    json_object *root = json_tokener_parse_ex(tok, got, (int)n);
    assert_int_equal(json_tokener_get_error(tok), json_tokener_success);
    json_tokener_free(tok);
    assert_non_null(root);
    assert_string_equal(json_object_get_string(field(root, "language")), "en");
    assert_float_equal(json_object_get_double(field(root, "language_probability")), 0.96875, 1e-9);
    json_object *segs = field(root, "segments");
    assert_true(json_object_is_type(segs, json_type_array));
    assert_int_equal(json_object_array_length(segs), N_SEG);
    const char *want_text[N_SEG] = {text0, text1, text2, text3, " caf\xEF\xBF\xBD \xEF\xBF\xBD"};
    for (int i = 0; i < N_SEG; i++) {
        json_object *o = json_object_array_get_idx(segs, (size_t)i);
        assert_int_equal(json_object_get_int(field(o, "id")), i);
        /* seconds: exact to the millisecond */
        assert_float_equal(json_object_get_double(field(o, "start")), s[i].t0_ms / 1000.0, 1e-9);
        assert_float_equal(json_object_get_double(field(o, "end")), s[i].t1_ms / 1000.0, 1e-9);
        assert_string_equal(json_object_get_string(field(o, "text")), want_text[i]);
        json_object *t = field(o, "tokens");
        assert_int_equal(json_object_array_length(t), s[i].n_tokens);
        for (int k = 0; k < s[i].n_tokens; k++) {
            json_object *tk = json_object_array_get_idx(t, (size_t)k);
            assert_int_equal(json_object_get_int(field(tk, "id")), s[i].tokens[k].id);
            /* the float itself reads back */
            assert_true((float)json_object_get_double(field(tk, "p")) == s[i].tokens[k].p);
        }
        if (i == 4)
            assert_null(field(o, "avg_logprob"));
        else
            assert_true((float)json_object_get_double(field(o, "avg_logprob")) == s[i].avg_logprob);
        assert_true((float)json_object_get_double(field(o, "no_speech_prob")) ==
                    s[i].no_speech_prob);
        assert_true((float)json_object_get_double(field(o, "temperature")) == s[i].temperature);
    }
    /* the numbers as a person (and a strict reader) expects them */
    assert_non_null(strstr(got, "\"start\":4.12,"));
    assert_non_null(strstr(got, "\"end\":6012.345,"));
    assert_non_null(strstr(got, "\"start\":0.0,"));
    assert_non_null(strstr(got, "\"p\":0.3\n"));
    assert_null(strstr(got, "Infinity"));
    json_object_put(root);
    free(got);
}

/* A segment whose text is blank makes no cue (an empty cue would end an SRT
 * file early for many readers); the numbering has no gap. */
static void test_blank_cue(void **state)
{
    (void)state;
    rlx_whisper_result r;
    rlx_whisper_segment s[N_SEG];
    build(&r, s);
    static char blank[] = " \n \n";
    s[1].text = blank;
    r.n_segments = 3;
    size_t n = 0;
    char *got = written(&r, RLX_WHISPER_SRT, &n);
    static const char want[] = "1\n00:00:00,000 --> 00:00:04,120\nAnd so, my fellow Americans\n\n"
                               "2\n01:39:59,000 --> 01:40:12,345\nA --> B & C <i>\n\n";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(got, want, n);
    free(got);
    got = written(&r, RLX_WHISPER_VTT, &n);
    assert_null(strstr(got, "04.120 --> 00:01:01.005"));
    free(got);
}

static void test_format_from_path(void **state)
{
    (void)state;
    assert_int_equal(rlx_whisper_format_from_path("a.txt"), RLX_WHISPER_TXT);
    assert_int_equal(rlx_whisper_format_from_path("dir/talk.srt"), RLX_WHISPER_SRT);
    assert_int_equal(rlx_whisper_format_from_path("TALK.VTT"), RLX_WHISPER_VTT);
    assert_int_equal(rlx_whisper_format_from_path("x.y.Json"), RLX_WHISPER_JSON);
    assert_int_equal(rlx_whisper_format_from_path("talk"), -1);
    assert_int_equal(rlx_whisper_format_from_path("talk.mp3"), -1);
    assert_int_equal(rlx_whisper_format_from_path("talk.srt.bak"), -1);
    assert_int_equal(rlx_whisper_format_from_path("out.srt/talk"), -1);
    assert_int_equal(rlx_whisper_format_from_path("talk.srt "), -1);
    assert_int_equal(rlx_whisper_format_from_path(""), -1);
    assert_int_equal(rlx_whisper_format_from_path(NULL), -1);
}

static void test_format_time(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(rlx_whisper_format_time(0, true, b, sizeof b), "00:00:00,000");
    assert_string_equal(rlx_whisper_format_time(3599999, false, b, sizeof b), "00:59:59.999");
    assert_string_equal(rlx_whisper_format_time(6012345, true, b, sizeof b), "01:40:12,345");
    assert_string_equal(rlx_whisper_format_time(360000000, false, b, sizeof b), "100:00:00.000");
    assert_string_equal(rlx_whisper_format_time(-5, false, b, sizeof b), "00:00:00.000");
}

/* The files in a folder besides `keep` (leftover temporary files). */
static int others_in(const char *dir, const char *keep)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, keep))
            n++;
    closedir(d);
    return n;
}

static void test_save(void **state)
{
    (void)state;
    rlx_whisper_result r;
    rlx_whisper_segment s[N_SEG];
    build(&r, s);
    const char *dir0 = rlx_test_tmp("save");
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s", dir0);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/talk.srt", dir);
    remove(path);
    rlx_error *err = NULL;
    if (rlx_whisper_save(&r, RLX_WHISPER_SRT, path, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    size_t n = 0, m = 0;
    char *got = rlx_test_read_file(path, &n);
    char *want = fixture("whisper-out.srt", &m);
    assert_int_equal(n, m);
    assert_memory_equal(got, want, n);
    free(got);
    free(want);
    assert_int_equal(others_in(dir, "talk.srt"), 0);
    /* saving again replaces it */
    r.n_segments = 1;
    assert_int_equal(rlx_whisper_save(&r, RLX_WHISPER_TXT, path, &err), RLX_OK);
    got = rlx_test_read_file(path, &n);
    assert_int_equal(n, strlen("And so, my fellow Americans\n"));
    free(got);

    /* a folder that does not exist: a sentence naming the file once */
    char bad[4300];
    snprintf(bad, sizeof bad, "%s/no-such-folder/talk.srt", dir);
    assert_int_equal(rlx_whisper_save(&r, RLX_WHISPER_SRT, bad, &err), RLX_ERR_IO);
    const char *msg = rlx_error_message(err);
    print_message("# %s\n", msg);
    const char *at = strstr(msg, bad);
    assert_non_null(at);
    assert_null(strstr(at + 1, bad));
    assert_non_null(strstr(msg, "No such file or directory"));
    rlx_error_free(err);
    err = NULL;
}

/* A folder we may not write to: the sentence, and the old file unchanged.
 * Root writes anywhere, so as root a child process drops to nobody first. */
static void test_save_unwritable(void **state)
{
    (void)state;
    rlx_whisper_result r;
    rlx_whisper_segment s[N_SEG];
    build(&r, s);
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp("locked"));
    mkdir(dir, 0755);
    chmod(dir, 0755);
    snprintf(path, sizeof path, "%s/talk.vtt", dir);
    static const char old[] = "an old transcript\n";
    assert_int_equal(rlx_test_write_file(path, old, sizeof old - 1), 0);
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(chmod(dir, 0555), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(77);
        rlx_error *err = NULL;
        rlx_status st = rlx_whisper_save(&r, RLX_WHISPER_VTT, path, &err);
        if (st != RLX_ERR_IO)
            _exit(2);
        const char *msg = rlx_error_message(err);
        printf("# %s\n", msg);
        fflush(stdout);
        _exit(strstr(msg, path) && strstr(msg, "ermission denied") ? 0 : 3);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    chmod(dir, 0755);
    assert_true(WIFEXITED(ws));
    if (WEXITSTATUS(ws) == 77)
        skip();
    assert_int_equal(WEXITSTATUS(ws), 0);
    size_t n = 0;
    char *got = rlx_test_read_file(path, &n);
    assert_int_equal(n, sizeof old - 1);
    assert_memory_equal(got, old, n);
    free(got);
    assert_int_equal(others_in(dir, "talk.vtt"), 0);
}

/* A stream that fails (here a pipe nobody reads) is RLX_ERR_IO, not a
 * silent success; an unknown format is refused. */
static void test_write_fails(void **state)
{
    (void)state;
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    close(fd[0]);
    signal(SIGPIPE, SIG_IGN);
    FILE *f = fdopen(fd[1], "w");
    assert_non_null(f);
    rlx_whisper_result r;
    rlx_whisper_segment s[N_SEG];
    build(&r, s);
    rlx_error *err = NULL;
    assert_int_equal(rlx_whisper_write(&r, RLX_WHISPER_JSON, f, &err), RLX_ERR_IO);
    print_message("# %s\n", rlx_error_message(err));
    rlx_error_free(err);
    err = NULL;
    fclose(f);
    assert_int_equal(rlx_whisper_write(&r, (rlx_whisper_format)9, stdout, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_txt),
        cmocka_unit_test(test_srt),
        cmocka_unit_test(test_vtt),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_blank_cue),
        cmocka_unit_test(test_format_from_path),
        cmocka_unit_test(test_format_time),
        cmocka_unit_test(test_save),
        cmocka_unit_test(test_save_unwritable),
        cmocka_unit_test(test_write_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
