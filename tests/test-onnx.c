/* The ONNX reader and importer on files written here byte by byte (a tiny
 * protobuf encoder): a well-formed model with external data, and hostile
 * ones (a cyclic graph, a tensor whose stated size exceeds its bytes,
 * external data outside the model's folder, 10^9-element shapes, deep
 * nesting, truncation), each of which must give a sentence, not a crash or
 * a huge allocation; and one error listing every unsupported op. The
 * numbers of real ops are tested against ONNX's own reference outputs in
 * test-onnx-node.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/formats/onnx.h"
#include "models/onnx/onnx-model.h"
#include "test-util.h"

/* ---- a protobuf writer ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void varint(buf *b, uint64_t v)
{
    uint8_t t[10];
    int k = 0;
    do {
        t[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            t[k] |= 0x80;
        k++;
    } while (v);
    put(b, t, (size_t)k);
}

static void f_varint(buf *b, int field, uint64_t v)
{
    varint(b, (uint64_t)field << 3);
    varint(b, v);
}

static void f_bytes(buf *b, int field, const void *d, size_t n)
{
    varint(b, (uint64_t)field << 3 | 2);
    varint(b, n);
    put(b, d, n);
}

static void f_str(buf *b, int field, const char *s)
{
    f_bytes(b, field, s, strlen(s));
}

/* append a submessage and free it */
static void f_msg(buf *b, int field, buf *m)
{
    f_bytes(b, field, m->p, m->n);
    free(m->p);
    memset(m, 0, sizeof *m);
}

/* NodeProto: inputs/outputs NULL-terminated lists */
static buf node(const char *op, const char *const *in, const char *const *out)
{
    buf n = {0};
    for (; in && *in; in++)
        f_str(&n, 1, *in);
    for (; out && *out; out++)
        f_str(&n, 2, *out);
    f_str(&n, 4, op);
    return n;
}

static void attr_str(buf *node_msg, const char *name, const char *v)
{
    buf a = {0};
    f_str(&a, 1, name);
    f_varint(&a, 20, 3);
    f_str(&a, 4, v);
    f_msg(node_msg, 5, &a);
}

/* ValueInfoProto float tensor with dims (rank dims) */
static buf value(const char *name, int rank, const int64_t *dims)
{
    buf shape = {0}, tt = {0}, tp = {0}, v = {0};
    for (int i = 0; i < rank; i++) {
        buf d = {0};
        f_varint(&d, 1, (uint64_t)dims[i]);
        f_msg(&shape, 1, &d);
    }
    f_varint(&tt, 1, 1);
    f_msg(&tt, 2, &shape);
    f_msg(&tp, 1, &tt);
    f_str(&v, 1, name);
    f_msg(&v, 2, &tp);
    return v;
}

/* a float TensorProto with raw bytes (n_raw may disagree with dims) */
static buf tensor(const char *name, int rank, const int64_t *dims, const void *raw, size_t n_raw)
{
    buf t = {0};
    for (int i = 0; i < rank; i++)
        f_varint(&t, 1, (uint64_t)dims[i]);
    f_varint(&t, 2, 1);
    f_str(&t, 8, name);
    if (raw)
        f_bytes(&t, 9, raw, n_raw);
    return t;
}

static void external(buf *t, const char *location, const char *offset, const char *length)
{
    const char *kv[3][2] = {{"location", location}, {"offset", offset}, {"length", length}};
    for (int i = 0; i < 3; i++) {
        if (!kv[i][1])
            continue;
        buf e = {0};
        f_str(&e, 1, kv[i][0]);
        f_str(&e, 2, kv[i][1]);
        f_msg(t, 13, &e);
    }
    f_varint(t, 14, 1);
}

/* ModelProto around a graph, opset 17 */
static buf model(buf *graph)
{
    buf m = {0}, os = {0};
    f_varint(&m, 1, 8);
    f_str(&os, 1, "");
    f_varint(&os, 2, 17);
    f_msg(&m, 8, &os);
    f_msg(&m, 7, graph);
    return m;
}

/* a folder in the test's scratch space (a copy: rlx_test_tmp's buffer is reused) */
static const char *dir_for(const char *name)
{
    static char dirs[16][1024];
    static int next;
    char *d = dirs[next++ % 16];
    snprintf(d, sizeof dirs[0], "%s", rlx_test_tmp(name));
    mkdir(d, 0755);
    return d;
}

static const char *write_model(const char *dir, buf *m)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    assert_int_equal(rlx_test_write_file(path, m->p, m->n), 0);
    free(m->p);
    memset(m, 0, sizeof *m);
    return path;
}

/* open must fail with `code` and a message containing `needle` */
static void expect_open_error(const char *path, rlx_status code, const char *needle)
{
    rlx_onnx_model *om = NULL;
    rlx_error *err = NULL;
    rlx_status st = rlx_onnx_open(path, &om, &err);
    if (st == RLX_OK || !strstr(rlx_error_message(err), needle))
        print_message("got status %d: %s\n", (int)st, rlx_error_message(err));
    assert_int_equal(st, code);
    assert_null(om);
    assert_non_null(strstr(rlx_error_message(err), needle));
    rlx_error_free(err);
}

/* x [1, 4] -> Relu -> y, weights w [4] (+ y2 = x * w) */
static buf small_graph(const void *w_raw, size_t w_n, bool w_external, const char *location)
{
    buf g = {0};
    buf n1 = node("Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    f_msg(&g, 1, &n1);
    buf n2 = node("Mul", (const char *[]){"x", "w", NULL}, (const char *[]){"y2", NULL});
    f_msg(&g, 1, &n2);
    f_str(&g, 2, "small");
    buf t = tensor("w", 1, (const int64_t[]){4}, w_external ? NULL : w_raw, w_n);
    if (w_external)
        external(&t, location, "4", "16");
    f_msg(&g, 5, &t);
    buf vi = value("x", 2, (const int64_t[]){1, 4});
    f_msg(&g, 11, &vi);
    buf vo = value("y", 2, (const int64_t[]){1, 4});
    f_msg(&g, 12, &vo);
    buf vo2 = value("y2", 2, (const int64_t[]){1, 4});
    f_msg(&g, 12, &vo2);
    return g;
}

static void test_well_formed_with_external_data(void **state)
{
    (void)state;
    const char *dir = dir_for("onnx-good");
    /* 4 bytes of padding, then the 16 bytes of w */
    float w[5] = {0, 1.5f, -2.0f, 3.0f, 0.25f};
    char wpath[1024];
    snprintf(wpath, sizeof wpath, "%s/weights.bin", dir);
    assert_int_equal(rlx_test_write_file(wpath, w, sizeof w), 0);
    buf g = small_graph(NULL, 0, true, "weights.bin");
    buf m = model(&g);
    const char *path = write_model(dir, &m);

    rlx_onnx_model *om = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_onnx_open(path, &om, &err), RLX_OK);
    assert_int_equal(rlx_onnx_opset_version(om, ""), 17);
    assert_int_equal(rlx_onnx_opset_version(om, "ai.onnx"), 17);
    assert_int_equal(rlx_onnx_n_nodes(om), 2);
    assert_int_equal(rlx_onnx_n_inputs(om), 1);
    assert_int_equal(rlx_onnx_n_outputs(om), 2);
    const rlx_onnx_tensor *t = rlx_onnx_find_initializer(om, "w");
    assert_non_null(t);
    assert_true(t->external);
    assert_int_equal(t->n_bytes, 16);
    assert_memory_equal(t->data, &w[1], 16);
    const rlx_onnx_value *x = rlx_onnx_input_at(om, 0);
    assert_string_equal(x->name, "x");
    assert_int_equal(x->rank, 2);
    assert_int_equal(x->dims[1], 4);

    /* and it runs: y = relu(x), y2 = x * w */
    rlx_onnx_runner *r = NULL;
    assert_int_equal(rlx_onnx_runner_create(NULL, om, &r, &err), RLX_OK);
    float in[4] = {-1, 2, -3, 4}, y[4], y2[4];
    const void *ins[1] = {in};
    void *outs[2] = {y, y2};
    assert_int_equal(rlx_onnx_runner_run(r, ins, outs, &err), RLX_OK);
    for (int i = 0; i < 4; i++) {
        assert_true(y[i] == (in[i] > 0 ? in[i] : 0));
        assert_true(y2[i] == in[i] * w[i + 1]);
    }
    rlx_onnx_runner_free(r);
    rlx_onnx_close(om);
}

static void test_cyclic_graph(void **state)
{
    (void)state;
    buf g = {0};
    buf a = node("Relu", (const char *[]){"b", NULL}, (const char *[]){"a", NULL});
    f_msg(&g, 1, &a);
    buf b = node("Relu", (const char *[]){"a", NULL}, (const char *[]){"b", NULL});
    f_msg(&g, 1, &b);
    buf vo = value("a", 1, (const int64_t[]){1});
    f_msg(&g, 12, &vo);
    buf m = model(&g);
    expect_open_error(write_model(dir_for("onnx-cycle"), &m), RLX_ERR_FORMAT, "cycle");

    /* a value read that nobody defines, and one defined twice */
    buf g2 = {0};
    buf c = node("Relu", (const char *[]){"nowhere", NULL}, (const char *[]){"y", NULL});
    f_msg(&g2, 1, &c);
    buf m2 = model(&g2);
    expect_open_error(write_model(dir_for("onnx-undefined"), &m2), RLX_ERR_FORMAT, "defines");
    buf g3 = {0};
    buf vi = value("x", 1, (const int64_t[]){1});
    f_msg(&g3, 11, &vi);
    buf d1 = node("Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    f_msg(&g3, 1, &d1);
    buf d2 = node("Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    f_msg(&g3, 1, &d2);
    buf m3 = model(&g3);
    expect_open_error(write_model(dir_for("onnx-twice"), &m3), RLX_ERR_FORMAT, "produced twice");
}

static void test_tensor_larger_than_its_bytes(void **state)
{
    (void)state;
    float four = 1.0f, four4[4] = {1, 2, 3, 4};
    /* 1000 x 1000 floats stated, 4 bytes present */
    buf g = small_graph(&four, 4, false, NULL);
    buf t = tensor("big", 2, (const int64_t[]){1000, 1000}, &four, 4);
    f_msg(&g, 5, &t);
    buf m = model(&g);
    expect_open_error(write_model(dir_for("onnx-short"), &m), RLX_ERR_FORMAT, "holds 4 bytes");

    /* 10^9 elements stated, and dims whose product overflows */
    buf g2 = small_graph(four4, 16, false, NULL);
    buf t2 = tensor("huge", 1, (const int64_t[]){1000000000}, &four, 4);
    f_msg(&g2, 5, &t2);
    buf m2 = model(&g2);
    expect_open_error(write_model(dir_for("onnx-1e9"), &m2), RLX_ERR_FORMAT, "holds 4 bytes");
    buf g3 = small_graph(four4, 16, false, NULL);
    buf t3 = tensor("over", 3, (const int64_t[]){1000000000, 1000000000, 1000000000}, &four, 4);
    f_msg(&g3, 5, &t3);
    buf m3 = model(&g3);
    expect_open_error(write_model(dir_for("onnx-overflow"), &m3), RLX_ERR_FORMAT,
                      "more elements than can exist");
    /* an external tensor reading past its file's end */
    const char *dir = dir_for("onnx-ext-short");
    char wpath[1024];
    snprintf(wpath, sizeof wpath, "%s/weights.bin", dir);
    assert_int_equal(rlx_test_write_file(wpath, &four, 4), 0);
    buf g4 = small_graph(NULL, 0, true, "weights.bin");
    buf m4 = model(&g4);
    expect_open_error(write_model(dir, &m4), RLX_ERR_FORMAT, "which has 4");
}

static void test_external_data_outside_folder(void **state)
{
    (void)state;
    const char *locations[] = {"../weights.bin", "/etc/passwd", "a/../../weights.bin"};
    for (int i = 0; i < 3; i++) {
        buf g = small_graph(NULL, 0, true, locations[i]);
        buf m = model(&g);
        char name[32];
        snprintf(name, sizeof name, "onnx-escape-%d", i);
        expect_open_error(write_model(dir_for(name), &m), RLX_ERR_FORMAT,
                          "not a file inside the model's folder");
    }
    /* a symlink inside the folder that leads out of it */
    const char *outside = dir_for("onnx-outside");
    char target[1024], link[1024];
    snprintf(target, sizeof target, "%s/w.bin", outside);
    float w[5] = {0};
    assert_int_equal(rlx_test_write_file(target, w, sizeof w), 0);
    const char *dir = dir_for("onnx-symlink");
    snprintf(link, sizeof link, "%s/weights.bin", dir);
    unlink(link);
    assert_int_equal(symlink(target, link), 0);
    buf g = small_graph(NULL, 0, true, "weights.bin");
    buf m = model(&g);
    expect_open_error(write_model(dir, &m), RLX_ERR_FORMAT, "leads outside");
    /* from memory, without a folder, external data is refused */
    buf g2 = small_graph(NULL, 0, true, "weights.bin");
    buf m2 = model(&g2);
    rlx_onnx_model *om = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_onnx_open_memory(m2.p, m2.n, NULL, NULL, &om, &err), RLX_ERR_FORMAT);
    assert_non_null(strstr(rlx_error_message(err), "not read from a folder"));
    rlx_error_free(err);
    free(m2.p);
}

static void test_huge_declared_shapes(void **state)
{
    (void)state;
    /* an input of 10^9 x 10^9 x 10^9 elements: opening is fine (nothing is
     * allocated for it), importing says why not */
    buf g = {0};
    buf n = node("Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    f_msg(&g, 1, &n);
    buf vi = value("x", 3, (const int64_t[]){1000000000, 1000000000, 1000000000});
    f_msg(&g, 11, &vi);
    buf vo = value("y", 1, (const int64_t[]){1});
    f_msg(&g, 12, &vo);
    buf m = model(&g);
    const char *path = write_model(dir_for("onnx-huge-input"), &m);
    rlx_onnx_model *om = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_onnx_open(path, &om, &err), RLX_OK);
    rlx_onnx_import *im = NULL;
    assert_int_not_equal(rlx_onnx_import_graph(om, NULL, &im, &err), RLX_OK);
    assert_null(im);
    assert_non_null(strstr(rlx_error_message(err), "more elements than can exist"));
    rlx_error_clear(&err);
    rlx_onnx_close(om);

    /* 10^9 x 10^3: it imports, and the session's budget refuses it before
     * anything that size is allocated */
    buf g2 = {0};
    buf n2 = node("Relu", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    f_msg(&g2, 1, &n2);
    buf vi2 = value("x", 2, (const int64_t[]){1000000000, 1000});
    f_msg(&g2, 11, &vi2);
    buf vo2 = value("y", 2, (const int64_t[]){1000000000, 1000});
    f_msg(&g2, 12, &vo2);
    buf m2 = model(&g2);
    path = write_model(dir_for("onnx-huge-run"), &m2);
    assert_int_equal(rlx_onnx_open(path, &om, &err), RLX_OK);
    rlx_onnx_runner_params p = rlx_onnx_runner_default_params();
    p.memory_budget = 1ull << 30;
    rlx_onnx_runner *r = NULL;
    rlx_status st = rlx_onnx_runner_create(&p, om, &r, &err);
    assert_int_not_equal(st, RLX_OK);
    assert_null(r);
    print_message("10^12-element input: %s\n", rlx_error_message(err));
    assert_true(rlx_error_message(err)[0] != '\0');
    rlx_error_clear(&err);
    rlx_onnx_close(om);
}

static void test_deep_nesting_and_garbage(void **state)
{
    (void)state;
    /* a graph in an attribute in a node in a graph ..., 200 deep */
    buf inner = {0};
    f_str(&inner, 2, "leaf");
    for (int i = 0; i < 200; i++) {
        buf nd = node("If", NULL, (const char *[]){"o", NULL});
        buf a = {0};
        f_str(&a, 1, "then_branch");
        f_varint(&a, 20, 5);
        f_msg(&a, 6, &inner);
        f_msg(&nd, 5, &a);
        buf g = {0};
        f_msg(&g, 1, &nd);
        inner = g;
    }
    buf m = model(&inner);
    expect_open_error(write_model(dir_for("onnx-deep"), &m), RLX_ERR_FORMAT, "nested more than");

    /* a truncated file, random bytes, an empty one */
    buf g = small_graph((float[]){1, 2, 3, 4}, 16, false, NULL);
    buf good = model(&g);
    for (size_t cut = 1; cut < good.n; cut += 7) {
        rlx_onnx_model *om = NULL;
        rlx_error *err = NULL;
        rlx_status st = rlx_onnx_open_memory(good.p, cut, NULL, "cut", &om, &err);
        if (st == RLX_OK)
            rlx_onnx_close(om); /* a prefix can be a valid smaller model */
        else
            assert_true(rlx_error_message(err)[0] != '\0');
        rlx_error_free(err);
    }
    free(good.p);
    uint8_t junk[256];
    for (int i = 0; i < 256; i++)
        junk[i] = (uint8_t)(i * 131 + 7);
    rlx_onnx_model *om = NULL;
    rlx_error *err = NULL;
    assert_int_not_equal(rlx_onnx_open_memory(junk, sizeof junk, NULL, "junk", &om, &err), RLX_OK);
    rlx_error_clear(&err);
    assert_int_equal(rlx_onnx_open_memory(junk, 0, NULL, "empty", &om, &err), RLX_ERR_FORMAT);
    rlx_error_clear(&err);
}

static void test_unsupported_listed_together(void **state)
{
    (void)state;
    buf g = {0};
    buf a = node("FancyOp", (const char *[]){"x", NULL}, (const char *[]){"a", NULL});
    f_msg(&g, 1, &a);
    buf b = node("Resize", (const char *[]){"a", "", "s", NULL}, (const char *[]){"b", NULL});
    attr_str(&b, "mode", "cubic");
    f_msg(&g, 1, &b);
    buf r = node("Relu", (const char *[]){"x", NULL}, (const char *[]){"r", NULL});
    f_msg(&g, 1, &r);
    buf c = node("Resize", (const char *[]){"r", "", "s", NULL}, (const char *[]){"c", NULL});
    attr_str(&c, "mode", "cubic");
    f_msg(&g, 1, &c);
    buf d = node("OtherOp", (const char *[]){"c", NULL}, (const char *[]){"d", NULL});
    f_msg(&g, 1, &d);
    float s[4] = {1, 1, 2, 2};
    buf t = tensor("s", 1, (const int64_t[]){4}, s, 16);
    f_msg(&g, 5, &t);
    buf vi = value("x", 4, (const int64_t[]){1, 1, 2, 2});
    f_msg(&g, 11, &vi);
    buf vo = value("d", 4, (const int64_t[]){1, 1, 4, 4});
    f_msg(&g, 12, &vo);
    buf m = model(&g);
    const char *path = write_model(dir_for("onnx-unsupported"), &m);
    rlx_onnx_model *om = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_onnx_open(path, &om, &err), RLX_OK);
    rlx_onnx_runner *run = NULL;
    assert_int_equal(rlx_onnx_runner_create(NULL, om, &run, &err), RLX_ERR_UNSUPPORTED);
    const char *msg = rlx_error_message(err);
    print_message("%s\n", msg);
    /* FancyOp, OtherOp and the cubic mode, each once */
    assert_non_null(strstr(msg, "3 unsupported"));
    assert_non_null(strstr(msg, "FancyOp"));
    assert_non_null(strstr(msg, "OtherOp"));
    assert_non_null(strstr(msg, "cubic"));
    assert_null(strstr(strstr(msg, "cubic") + 1, "cubic"));
    rlx_error_free(err);
    rlx_onnx_close(om);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_formed_with_external_data),
        cmocka_unit_test(test_cyclic_graph),
        cmocka_unit_test(test_tensor_larger_than_its_bytes),
        cmocka_unit_test(test_external_data_outside_folder),
        cmocka_unit_test(test_huge_declared_shapes),
        cmocka_unit_test(test_deep_nesting_and_garbage),
        cmocka_unit_test(test_unsupported_listed_together),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
