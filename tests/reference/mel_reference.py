#!/usr/bin/python3
"""Independent reference for engine/audio/mel.c: openai-whisper's
log_mel_spectrogram, written from its published algorithm in NumPy float64.

  audio  = jfk.wav as float (int16 / 32768), 16 kHz mono
  x      = audio followed by 480000 zeros          (padding=N_SAMPLES)
  x      = reflect-pad 200 at both ends             (torch.stft center=True)
  frames = x[160 t : 160 t + 400] * hann(400, periodic), t = 0 .. 1 + (len - 400) / 160
  power  = |rfft(frame)|^2, the last frame dropped
  mel    = filters @ power, filters = the 80x201 filterbank stored in the ggml file
  log    = log10(max(mel, 1e-10))

The filterbank is read from whisper.cpp's ggml file (magic 0x67676d6c, 11 i32
hparams, then n_mel i32, n_fft i32, n_mel * n_fft f32), the same one openai
ships as mel_filters.npz.

Writes tests/fixtures/mel-jfk-ref.f32, little-endian float32:
  [0] max of log over frames 0..2999      [1] max over every frame (4100)
  [2] number of frames (4100)             [3] number of samples (176000)
  then frames 0..99 of log, [80][100], then frames 1000..1099, [80][100]
and tests/fixtures/mel-filters-128-ref.f32: the 128-mel Slaney filterbank
(large-v3's), [128][201] float32, from librosa's formulas re-written below.

Run: /usr/bin/python3 tests/reference/mel_reference.py ../shared/data tests/fixtures
"""
import struct
import sys
import wave

import numpy as np


def read_filters(path):
    with open(path, "rb") as f:
        magic, = struct.unpack("<I", f.read(4))
        assert magic == 0x67676D6C, hex(magic)
        hp = struct.unpack("<11i", f.read(44))
        n_mels_hp = hp[9]
        n_mel, n_fft = struct.unpack("<2i", f.read(8))
        assert n_mel == n_mels_hp and n_fft == 201, (n_mel, n_fft)
        filt = np.frombuffer(f.read(4 * n_mel * n_fft), dtype="<f4").reshape(n_mel, n_fft)
    return filt


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float64) / 32768.0


def log_mel(audio, filters):
    n_fft, hop = 400, 160
    x = np.concatenate([audio, np.zeros(480000)])
    x = np.pad(x, (n_fft // 2, n_fft // 2), mode="reflect")
    n_frames = 1 + (len(x) - n_fft) // hop
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)  # periodic Hann
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n_frames)[:, None]
    spec = np.fft.rfft(x[idx] * win[None, :], axis=1)  # [frames, 201]
    power = np.abs(spec[:-1]) ** 2  # drop the last frame
    mel = filters.astype(np.float64) @ power.T  # [80, frames]
    return np.log10(np.maximum(mel, 1e-10))


def librosa_mel(sr, n_fft, n_mels):
    """librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels) (htk=False,
    norm='slaney', fmin=0, fmax=sr/2), re-written from librosa's documented
    formulas: Slaney's scale is linear (200/3 Hz a mel) below 1 kHz and
    logarithmic (log(6.4)/27 a mel) above; triangles between consecutive
    points of n_mels + 2 mel-spaced frequencies, scaled by 2 / width."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0

    def hz_to_mel(f):
        return min_log_mel + np.log(f / min_log_hz) / logstep if f >= min_log_hz else f / f_sp

    def mel_to_hz(m):
        return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)),
                        f_sp * m)

    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2.0), n_mels + 2))
    fft_f = np.fft.rfftfreq(n_fft, 1.0 / sr)
    w = np.zeros((n_mels, n_fft // 2 + 1), dtype=np.float32)
    for i in range(n_mels):
        lower = (fft_f - mel_f[i]) / (mel_f[i + 1] - mel_f[i])
        upper = (mel_f[i + 2] - fft_f) / (mel_f[i + 2] - mel_f[i + 1])
        w[i] = np.maximum(0, np.minimum(lower, upper))
    w *= (2.0 / (mel_f[2:] - mel_f[:-2]))[:, None]
    return w


def main():
    data, out = sys.argv[1], sys.argv[2]
    filters = read_filters(data + "/whisper/for-tests-ggml-tiny.bin")
    audio = read_wav(data + "/audio/jfk.wav")
    lm = log_mel(audio, filters)
    print("samples", len(audio), "frames", lm.shape[1])
    head = [lm[:, :3000].max(), lm.max(), lm.shape[1], len(audio)]
    blocks = [lm[:, 0:100], lm[:, 1000:1100]]
    with open(out + "/mel-jfk-ref.f32", "wb") as f:
        f.write(np.array(head, dtype="<f4").tobytes())
        for b in blocks:
            f.write(np.ascontiguousarray(b, dtype="<f4").tobytes())
    f128 = librosa_mel(16000, 400, 128)
    with open(out + "/mel-filters-128-ref.f32", "wb") as f:
        f.write(f128.astype("<f4").tobytes())
    f80 = librosa_mel(16000, 400, 80)
    print("80-mel formula vs the ggml file's filterbank: max abs diff %.3g" %
          np.abs(f80 - filters).max())
    print("max(0..2999) %.6f max(all) %.6f" % (head[0], head[1]))


if __name__ == "__main__":
    main()
