/* rlx info MODEL.onnx: opset, inputs and outputs with their shapes, the op
 * histogram with the ops the importer lacks marked, the weights, and
 * whether the whole graph imports (every unsupported op or attribute). */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/rlx-cli.h"
#include "engine/formats/onnx.h"
#include "models/onnx/onnx-model.h"

static json_object *value_json(const rlx_onnx_value *v)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(v->name));
    json_object_object_add(o, "type",
                           json_object_new_string(rlx_onnx_elem_type_name(v->elem_type)));
    if (v->rank >= 0) {
        json_object *sh = json_object_new_array();
        for (int i = 0; i < v->rank; i++) {
            if (v->dims[i] >= 0)
                json_object_array_add(sh, json_object_new_int64(v->dims[i]));
            else
                json_object_array_add(
                    sh, json_object_new_string(
                            v->dim_params[i] && v->dim_params[i][0] ? v->dim_params[i] : "?"));
        }
        json_object_object_add(o, "shape", sh);
    }
    return o;
}

static void print_value(json_object *v)
{
    json_object *sh;
    printf("  %-32s %-8s ", json_object_get_string(json_object_object_get(v, "name")),
           json_object_get_string(json_object_object_get(v, "type")));
    if (json_object_object_get_ex(v, "shape", &sh)) {
        printf("[");
        for (size_t i = 0; i < json_object_array_length(sh); i++)
            printf("%s%s", i ? ", " : "", json_object_get_string(json_object_array_get_idx(sh, i)));
        printf("]\n");
    } else
        printf("(shape not given)\n");
}

int rlx_info_onnx(const char *path, bool with_tensors, bool as_json)
{
    rlx_onnx_model *m = NULL;
    rlx_error *err = NULL;
    if (rlx_onnx_open(path, &m, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "path", json_object_new_string(path));
    json_object_object_add(o, "format", json_object_new_string("onnx"));
    json_object_object_add(o, "ir_version", json_object_new_int64(rlx_onnx_ir_version(m)));
    json_object_object_add(o, "producer", json_object_new_string(rlx_onnx_producer(m)));
    json_object *ops = json_object_new_object();
    for (int32_t i = 0; i < rlx_onnx_n_opsets(m); i++) {
        const rlx_onnx_opset *s = rlx_onnx_opset_at(m, i);
        json_object_object_add(ops, s->domain[0] ? s->domain : "ai.onnx",
                               json_object_new_int64(s->version));
    }
    json_object_object_add(o, "opsets", ops);
    json_object *ins = json_object_new_array(), *outs = json_object_new_array();
    for (int32_t i = 0; i < rlx_onnx_n_inputs(m); i++)
        json_object_array_add(ins, value_json(rlx_onnx_input_at(m, i)));
    for (int32_t i = 0; i < rlx_onnx_n_outputs(m); i++)
        json_object_array_add(outs, value_json(rlx_onnx_output_at(m, i)));
    json_object_object_add(o, "inputs", ins);
    json_object_object_add(o, "outputs", outs);
    /* op histogram, in first-seen order */
    json_object *hist = json_object_new_object(), *missing = json_object_new_array();
    for (int32_t i = 0; i < rlx_onnx_n_nodes(m); i++) {
        const rlx_onnx_node *n = rlx_onnx_node_at(m, i);
        char key[256];
        snprintf(key, sizeof key, "%s%s%s", n->domain, n->domain[0] ? "." : "", n->op_type);
        json_object *c;
        if (json_object_object_get_ex(hist, key, &c))
            json_object_set_int64(c, json_object_get_int64(c) + 1);
        else {
            json_object_object_add(hist, key, json_object_new_int64(1));
            if (!rlx_onnx_op_supported(n->domain, n->op_type))
                json_object_array_add(missing, json_object_new_string(key));
        }
    }
    json_object_object_add(o, "n_nodes", json_object_new_int64(rlx_onnx_n_nodes(m)));
    json_object_object_add(o, "ops", hist);
    json_object_object_add(o, "missing_ops", missing);
    uint64_t bytes = 0;
    json_object *list = with_tensors ? json_object_new_array() : NULL;
    for (int32_t i = 0; i < rlx_onnx_n_initializers(m); i++) {
        const rlx_onnx_tensor *t = rlx_onnx_initializer_at(m, i);
        bytes += t->n_bytes;
        if (list) {
            json_object *e = json_object_new_object(), *sh = json_object_new_array();
            json_object_object_add(e, "name", json_object_new_string(t->name));
            json_object_object_add(e, "type",
                                   json_object_new_string(rlx_onnx_elem_type_name(t->elem_type)));
            for (int d = 0; d < t->rank; d++)
                json_object_array_add(sh, json_object_new_int64(t->dims[d]));
            json_object_object_add(e, "shape", sh);
            json_object_object_add(e, "bytes", json_object_new_int64((int64_t)t->n_bytes));
            if (t->external)
                json_object_object_add(e, "external", json_object_new_boolean(1));
            json_object_array_add(list, e);
        }
    }
    json_object_object_add(o, "n_initializers", json_object_new_int64(rlx_onnx_n_initializers(m)));
    json_object_object_add(o, "weight_bytes", json_object_new_int64((int64_t)bytes));
    if (list)
        json_object_object_add(o, "tensors", list);
    /* the import itself: unsupported attributes and modes show here too */
    rlx_onnx_import *im = NULL;
    rlx_status st = rlx_onnx_import_graph(m, NULL, &im, &err);
    json_object_object_add(o, "imports", json_object_new_boolean(st == RLX_OK));
    if (st != RLX_OK)
        json_object_object_add(o, "import_error", json_object_new_string(rlx_error_message(err)));
    rlx_error_clear(&err);
    rlx_onnx_import_free(im);

    if (as_json) {
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
    } else {
        printf("file:          %s\n", path);
        printf("format:        ONNX (IR version %lld%s%s)\n", (long long)rlx_onnx_ir_version(m),
               rlx_onnx_producer(m)[0] ? ", made by " : "", rlx_onnx_producer(m));
        printf("opsets:       ");
        json_object_object_foreach(ops, dk, dv)
        {
            printf(" %s %s", dk, json_object_get_string(dv));
        }
        printf("\ninputs:\n");
        for (size_t i = 0; i < json_object_array_length(ins); i++)
            print_value(json_object_array_get_idx(ins, i));
        printf("outputs:\n");
        for (size_t i = 0; i < json_object_array_length(outs); i++)
            print_value(json_object_array_get_idx(outs, i));
        printf("nodes:         %d\n", (int)rlx_onnx_n_nodes(m));
        json_object_object_foreach(hist, hk, hv)
        {
            bool miss = false;
            for (size_t i = 0; i < json_object_array_length(missing); i++)
                miss |= !strcmp(json_object_get_string(json_object_array_get_idx(missing, i)), hk);
            printf("  %-32s %6s%s\n", hk, json_object_get_string(hv), miss ? "  (missing)" : "");
        }
        char b[32];
        double mib = (double)bytes / (1024.0 * 1024.0);
        snprintf(b, sizeof b, "%.1f MiB", mib);
        printf("weights:       %d initializers, %s\n", (int)rlx_onnx_n_initializers(m), b);
        if (list)
            for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *t = json_object_array_get_idx(list, i);
                printf("  %-48s %-8s %s\n",
                       json_object_get_string(json_object_object_get(t, "name")),
                       json_object_get_string(json_object_object_get(t, "type")),
                       json_object_get_string(json_object_object_get(t, "shape")));
            }
        printf("missing ops:   ");
        if (!json_object_array_length(missing))
            printf("none");
        for (size_t i = 0; i < json_object_array_length(missing); i++)
            printf("%s%s", i ? ", " : "",
                   json_object_get_string(json_object_array_get_idx(missing, i)));
        printf("\nimport:        %s\n",
               st == RLX_OK ? "ok (every op and attribute is supported)"
                            : json_object_get_string(json_object_object_get(o, "import_error")));
    }
    json_object_put(o);
    rlx_onnx_close(m);
    return 0;
}
