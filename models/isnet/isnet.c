/* Background removal over the ONNX runner (isnet.h). The host work is the
 * package's resize / normalize / mask resize; the network runs in the
 * runner's program. */
#include "models/isnet/isnet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/base/dtype.h"
#include "engine/formats/onnx.h"
#include "models/onnx/onnx-model.h"

struct rlx_isnet {
    rlx_onnx_model *m;
    rlx_onnx_runner *r;
    int side;
    int32_t in_type, out_type; /* FLOAT or FLOAT16 */
};

rlx_isnet_params rlx_isnet_default_params(void)
{
    return (rlx_isnet_params){.device = "cpu"};
}

bool rlx_isnet_is_onnx_name(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n > 5 && strcasecmp(path + n - 5, ".onnx") == 0;
}

void rlx_isnet_close(rlx_isnet *n)
{
    if (!n)
        return;
    rlx_onnx_runner_free(n->r);
    rlx_onnx_close(n->m);
    free(n);
}

int rlx_isnet_side(const rlx_isnet *n)
{
    return n ? n->side : 0;
}

struct rlx_session *rlx_isnet_session(rlx_isnet *n)
{
    return n ? rlx_onnx_runner_session(n->r) : NULL;
}

static bool float_type(int32_t t)
{
    return t == RLX_ONNX_FLOAT || t == RLX_ONNX_FLOAT16;
}

rlx_status rlx_isnet_open(const rlx_isnet_params *p, const char *path, rlx_isnet **out,
                          rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_isnet_open: bad argument");
    rlx_isnet_params dp = rlx_isnet_default_params();
    if (!p)
        p = &dp;
    rlx_isnet *n = calloc(1, sizeof *n);
    if (!n)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    rlx_status st = rlx_onnx_open(path, &n->m, err);
    if (st != RLX_OK)
        goto fail;
    /* the shape check before compiling: a model of another kind is told so
     * in a sentence, not after a long compile */
    if (rlx_onnx_n_inputs(n->m) < 1 || rlx_onnx_n_outputs(n->m) < 1) {
        st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                           "%s is not a background-removal model: it has no input or no output",
                           path);
        goto fail;
    }
    const rlx_onnx_value *in = rlx_onnx_input_at(n->m, 0);
    const rlx_onnx_value *o = rlx_onnx_output_at(n->m, 0);
    bool ok = rlx_onnx_n_inputs(n->m) == 1 && float_type(in->elem_type) && in->rank == 4 &&
              (in->dims[0] == 1 || in->dims[0] < 0) && in->dims[1] == 3 &&
              in->dims[2] == in->dims[3] && float_type(o->elem_type);
    if (!ok) {
        st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                           "%s is not a background-removal model: it should take one picture "
                           "of shape [1, 3, S, S] (as ISNet does) and give a mask",
                           path);
        goto fail;
    }
    n->side = in->dims[2] > 0 ? (int)in->dims[2] : RLX_ISNET_DEFAULT_SIDE;
    if (n->side < 8 || n->side > 4096) {
        st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                           "%s takes pictures of %dx%d pixels: background removal handles 8 to "
                           "4096",
                           path, n->side, n->side);
        goto fail;
    }
    rlx_onnx_input_shape shape = {.name = in->name, .rank = 4, .dims = {1, 3, n->side, n->side}};
    rlx_onnx_runner_params rp = rlx_onnx_runner_default_params();
    rp.device = p->device ? p->device : "cpu";
    rp.n_threads = p->n_threads;
    rp.memory_budget = p->memory_budget;
    rp.import.shapes = &shape;
    rp.import.n_shapes = 1;
    st = rlx_onnx_runner_create(&rp, n->m, &n->r, err);
    if (st != RLX_OK)
        goto fail;
    const rlx_onnx_io *ri = rlx_onnx_runner_input(n->r, 0), *ro = rlx_onnx_runner_output(n->r, 0);
    if (rlx_onnx_runner_n_inputs(n->r) != 1 || ri->numel != (int64_t)3 * n->side * n->side ||
        ro->numel != (int64_t)n->side * n->side) {
        st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                           "%s is not a background-removal model: its first output has %lld "
                           "values, not the %dx%d of a mask",
                           path, (long long)ro->numel, n->side, n->side);
        goto fail;
    }
    n->in_type = ri->elem_type;
    n->out_type = ro->elem_type;
    *out = n;
    return RLX_OK;
fail:
    rlx_isnet_close(n);
    return st;
}

rlx_status rlx_isnet_preprocess(const rlx_image *img, int side, float *chw, rlx_error **err)
{
    if (!img || !img->rgb || !chw || side < 1 || img->width < 1 || img->height < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_isnet_preprocess: bad argument");
    size_t plane = (size_t)side * (size_t)side;
    uint8_t *px = malloc(plane * 3);
    if (!px)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory resizing the picture");
    rlx_status st = rlx_image_resize_bilinear_topleft(img->rgb, img->width, img->height, 3, px,
                                                      side, side, err);
    if (st == RLX_OK)
        for (size_t i = 0; i < plane; i++)
            for (int c = 0; c < 3; c++)
                chw[c * plane + i] = ((float)px[3 * i + c] - 128.0f) / 256.0f;
    free(px);
    return st;
}

rlx_status rlx_isnet_postprocess(const float *out, int side, int width, int height, uint8_t *alpha,
                                 rlx_error **err)
{
    if (!out || !alpha || side < 1 || width < 1 || height < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_isnet_postprocess: bad argument");
    size_t plane = (size_t)side * (size_t)side;
    uint8_t *m = malloc(plane);
    if (!m)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the mask");
    for (size_t i = 0; i < plane; i++) {
        /* a Uint8Array store truncates toward zero; the model's values are
         * probabilities, and anything outside 0..1 is clamped (NaN: 0) */
        double v = (double)out[i] * 255.0;
        m[i] = !(v > 0) ? 0 : v >= 255 ? 255 : (uint8_t)v;
    }
    rlx_status st = rlx_image_resize_bilinear_topleft(m, side, side, 1, alpha, width, height, err);
    free(m);
    return st;
}

rlx_status rlx_isnet_run(rlx_isnet *n, const rlx_image *img, uint8_t *alpha, float *raw_out,
                         rlx_error **err)
{
    if (!n || !img || !alpha)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_isnet_run: bad argument");
    size_t plane = (size_t)n->side * (size_t)n->side;
    float *x = malloc(plane * 3 * sizeof *x);
    float *y = malloc(plane * sizeof *y);
    uint16_t *h = NULL;
    rlx_status st = RLX_OK;
    if (!x || !y) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the model's input");
        goto done;
    }
    st = rlx_isnet_preprocess(img, n->side, x, err);
    if (st != RLX_OK)
        goto done;
    /* a float16 input or output goes through a half buffer */
    if (n->in_type == RLX_ONNX_FLOAT16 || n->out_type == RLX_ONNX_FLOAT16) {
        h = malloc(plane * 3 * sizeof *h);
        if (!h) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the model's input");
            goto done;
        }
    }
    const void *in = x;
    if (n->in_type == RLX_ONNX_FLOAT16) {
        for (size_t i = 0; i < plane * 3; i++)
            h[i] = rlx_f32_to_f16(x[i]);
        in = h;
    }
    void *outp = n->out_type == RLX_ONNX_FLOAT16 ? (void *)h : (void *)y;
    /* outputs after the first (ISNet's side outputs) are left to the runner */
    int32_t no = rlx_onnx_runner_n_outputs(n->r);
    void **outs = calloc((size_t)no, sizeof *outs);
    if (!outs) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    outs[0] = outp;
    for (int32_t i = 1; i < no && st == RLX_OK; i++) {
        const rlx_onnx_io *io = rlx_onnx_runner_output(n->r, i);
        outs[i] = malloc((size_t)io->numel * rlx_onnx_elem_size(io->elem_type) + 1);
        if (!outs[i])
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the model's outputs");
    }
    if (st == RLX_OK)
        st = rlx_onnx_runner_run(n->r, &in, outs, err);
    for (int32_t i = 1; i < no; i++)
        free(outs[i]);
    free(outs);
    if (st != RLX_OK)
        goto done;
    if (n->out_type == RLX_ONNX_FLOAT16)
        for (size_t i = 0; i < plane; i++)
            y[i] = rlx_f16_to_f32(h[i]);
    if (raw_out)
        memcpy(raw_out, y, plane * sizeof *y);
    st = rlx_isnet_postprocess(y, n->side, img->width, img->height, alpha, err);
done:
    free(x);
    free(y);
    free(h);
    return st;
}
