#!/usr/bin/python3
"""Compare rlx run's output (.npy) with ONNX Runtime's (raw float32 from
onnx_ort_run.js): max and mean absolute difference, and for a mask model the
share of pixels whose threshold (0.5) agrees.

    onnx_compare.py OURS.npy ORT.f32
"""
import sys

import numpy as np

ours = np.load(sys.argv[1]).astype(np.float32).ravel()
ref = np.fromfile(sys.argv[2], dtype=np.float32)
if ours.shape != ref.shape:
    sys.exit(f"sizes differ: {ours.shape} and {ref.shape}")
d = np.abs(ours - ref)
print(f"max abs diff {d.max():.3g}, mean {d.mean():.3g}, reference range "
      f"[{ref.min():.3g}, {ref.max():.3g}]")
print(f"thresholded at 0.5, agreeing pixels: {((ours > 0.5) == (ref > 0.5)).mean() * 100:.3f}%")
