/* The live loop with a stand-in decoder, for tests: the settling rules of
 * whisper-live.h on scripted segments, without a model. Not installed.
 *
 * Thread safety: as whisper-live.h.
 */
#ifndef RLX_MODELS_WHISPER_WHISPER_LIVE_INTERNAL_H
#define RLX_MODELS_WHISPER_WHISPER_LIVE_INTERNAL_H

#include "models/whisper/whisper-live.h"

/* What rlx_whisper_transcribe does for the live loop: segments of samples
 * [0, n) with times from their start; *out set on RLX_OK. */
typedef rlx_status (*rlx_whisper_live_decode_fn)(void *user, const float *samples, int64_t n,
                                                 const rlx_whisper_decode_params *dp,
                                                 rlx_whisper_result **out, rlx_error **err);

rlx_status rlx_whisper_live_create_with(rlx_whisper_live_decode_fn decode, void *decode_user,
                                        const rlx_whisper_decode_params *dp,
                                        const rlx_whisper_live_params *lp,
                                        const rlx_whisper_callbacks *cb, rlx_whisper_live **out,
                                        rlx_error **err);

#endif
