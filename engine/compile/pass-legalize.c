#include "engine/compile/passes.h"

rlx_status rlx_pass_legalize(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    (void)g;
    (void)opts;
    (void)err;
    return RLX_OK;
}
