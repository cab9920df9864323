/* Between session.c and its compiler glue (session-compile.c). Not installed. */
#ifndef RLX_ENGINE_RUNTIME_SESSION_INTERNAL_H
#define RLX_ENGINE_RUNTIME_SESSION_INTERNAL_H

#include "engine/runtime/session.h"

/* A cached program with this key, or NULL. */
rlx_session_program *rlx_session_find_cached(rlx_session *s, uint64_t key);
/* Load `lir`; with lir_free non-NULL the session owns the LIR and frees it
 * with lir_free (also when loading fails). key != 0 caches the program. */
rlx_status rlx_session_load_internal(rlx_session *s, rlx_lir *lir, void (*lir_free)(rlx_lir *),
                                     uint64_t key, rlx_session_program **out, rlx_error **err);
/* Report progress; false when the callback asked to stop or the session
 * is cancelled. */
bool rlx_session_progress(rlx_session *s, const char *stage, double fraction);

#endif
