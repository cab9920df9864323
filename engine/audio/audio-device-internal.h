/* Capture and playback without a sound card, for tests: the same ring,
 * delivery thread, resampling and chunking as a PortAudio stream, with the
 * test standing in for PortAudio's realtime callback. Not installed.
 *
 * Thread safety: as audio-device.h; feed/pull play the realtime thread's part,
 * so call them from one thread at a time.
 */
#ifndef RLX_ENGINE_AUDIO_AUDIO_DEVICE_INTERNAL_H
#define RLX_ENGINE_AUDIO_AUDIO_DEVICE_INTERNAL_H

#include "engine/audio/audio-device.h"

/* A capture whose "device" runs at dev_rate with dev_channels interleaved
 * channels; rlx_audio_capture_stop frees it as usual. */
rlx_status rlx_audio_capture_start_detached(const rlx_audio_capture_params *p, int dev_rate,
                                            int dev_channels, rlx_audio_capture **out,
                                            rlx_error **err);
/* What PortAudio's callback would do with `frames` interleaved frames. */
void rlx_audio_capture_feed(rlx_audio_capture *c, const float *interleaved, size_t frames);

/* A playback whose "device" runs at dev_rate with dev_channels channels. */
rlx_status rlx_audio_play_start_detached(const float *x, int64_t n, int rate, int64_t offset,
                                         int dev_rate, int dev_channels, rlx_audio_playback **out,
                                         rlx_error **err);
/* What the device would ask for: up to 512 interleaved frames into out;
 * returns true while playback continues (false: that was the last buffer). */
bool rlx_audio_playback_pull(rlx_audio_playback *p, float *out, size_t frames);

#endif
