/* What the CLI says about CPU threads: the note when -t asks for more than
 * the process may use, and (with -v / in `rlx bench`) the counts the runs
 * took and why. */
#ifndef RLX_APP_RLX_THREADS_H
#define RLX_APP_RLX_THREADS_H

#include <stdbool.h>
#include <stddef.h>

#include "models/llm/llm.h"

/* After loading m with n_threads asked (0: the default): a one-line note on
 * stderr when the device took fewer (capped to the usable cores); with
 * verbose, a line on how many the device took and where the count came
 * from. Nothing when m runs on no CPU. */
void rlx_cli_thread_note(const char *cmd, rlx_llm *m, int asked, bool verbose);

/* A line on stderr: the threads the last prompt and one-token runs used,
 * and why a run took one thread. Nothing before any run on the CPU. */
void rlx_cli_thread_use(const rlx_llm *m);

/* "2" or "1 (of 2: small model)" for a run that took `used` of the device's
 * `device` threads; buf is returned. */
const char *rlx_cli_thread_label(int used, int device, char *buf, size_t cap);

#endif
