/* The CPU backend's entry in the registry.
 *
 * Usage: through the registry (rlx_backend_find("cpu")), or directly as
 * &rlx_cpu_backend. Thread safety: the interface struct is immutable.
 */
#ifndef RLX_BACKENDS_CPU_CPU_BACKEND_H
#define RLX_BACKENDS_CPU_CPU_BACKEND_H

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const rlx_backend_i rlx_cpu_backend;

#ifdef __cplusplus
}
#endif
#endif
