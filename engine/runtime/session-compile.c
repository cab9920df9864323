/* rlx_session_compile: graph -> LIR (engine/compile) -> program, cached by
 * the graph's hash (which covers its symbols' bounds). */
#include "engine/compile/compile.h"
#include "engine/ir/graph.h"
#include "engine/runtime/session-internal.h"

rlx_status rlx_session_compile(rlx_session *s, const struct rlx_graph *g, rlx_session_program **out,
                               rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!s || !g || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_session_compile: missing argument");
    uint64_t key = rlx_graph_hash(g);
    if (key == 0)
        key = 1;
    rlx_session_program *p = rlx_session_find_cached(s, key);
    if (p) {
        *out = p;
        return RLX_OK;
    }
    if (!rlx_session_progress(s, "compile", 0.0))
        return rlx_error_set(err, RLX_ERR_CANCELLED, "compilation cancelled");
    rlx_compile_opts opts = rlx_compile_default_opts();
    opts.backend = rlx_session_backend(s);
    opts.device = rlx_session_device(s);
    rlx_lir *lir = NULL;
    rlx_status st = rlx_compile(g, &opts, &lir, err);
    if (st != RLX_OK)
        return st;
    st = rlx_session_load_internal(s, lir, rlx_lir_free, key, out, err);
    if (st == RLX_OK && !rlx_session_progress(s, "compile", 1.0))
        return rlx_error_set(err, RLX_ERR_CANCELLED, "compilation cancelled");
    return st;
}
