/* rlx_session_compile for a tree without engine/compile yet: a clear error
 * instead of a link failure. Replaced by session-compile.c once the
 * compiler is built (engine/runtime/meson.build picks one). */
#include "engine/runtime/session-internal.h"

rlx_status rlx_session_compile(rlx_session *s, const struct rlx_graph *g, rlx_session_program **out,
                               rlx_error **err)
{
    (void)s;
    (void)g;
    if (out)
        *out = NULL;
    return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                         "this build has no graph compiler: load an LIR instead");
}
