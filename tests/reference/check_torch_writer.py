#!/usr/bin/python3
"""Proves tests/torch-writer.c against real PyTorch, once, outside CI.

    /usr/bin/python3 tests/reference/check_torch_writer.py [build/tests/write-sam-model]

Writes the small random-weight SAM of tests/sam-writer.h, then MobileSAM
(layout mobile_sam: f32 tensors and I64 num_batches_tracked scalars), twice with
write-sam-model (as a torch.save .pth, "pt", and as safetensors, the
default), then:
  - checks the zip with Python's zipfile: every entry STORED, every CRC-32
    right (testzip), each entry's data at a multiple of 64 bytes, the
    entries torch expects (data.pkl, version, byteorder, data/<key>);
  - loads the .pth with torch.load (weights_only=True where that torch has
    it, so only the globals a state dict needs are allowed) and checks the
    result is an OrderedDict of contiguous f32 (and I64) CPU tensors;
  - compares every tensor, name, order, shape and bits, with the safetensors
    file read here by a small reader of its own (JSON header + numpy).
Prints one line per check and "OK" at the end; exits 1 on the first failure.
"""
import collections
import inspect
import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import torch

writer = sys.argv[1] if len(sys.argv) > 1 else "build/tests/write-sam-model"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = collections.OrderedDict()
    for name, t in header.items():  # json keeps the file's order
        if name == "__metadata__":
            continue
        if t["dtype"] not in ("F32", "I64"):
            fail(f"{name}: safetensors dtype {t['dtype']}")
        a, b = t["data_offsets"]
        dt = "<f4" if t["dtype"] == "F32" else "<i8"
        out[name] = np.frombuffer(data[base + a:base + b], dtype=dt).reshape(t["shape"])
    return out


def check(stem, extra):
    with tempfile.TemporaryDirectory() as tmp:
        pth = os.path.join(tmp, stem + ".pth")
        st = os.path.join(tmp, stem + ".safetensors")
        subprocess.run([writer, pth, "pt"] + extra, check=True)
        subprocess.run([writer, st] + extra, check=True)

        with zipfile.ZipFile(pth) as z:
            infos = z.infolist()
            names = [i.filename for i in infos]
            if any(i.compress_type != zipfile.ZIP_STORED for i in infos):
                fail("a compressed entry")
            bad = z.testzip()
            if bad is not None:
                fail(f"CRC-32 of {bad} is wrong")
            prefix = names[0].split("/")[0]
            if prefix != stem:
                fail(f"archive folder {prefix!r}")
            for want in ("data.pkl", "version", "byteorder"):
                if f"{prefix}/{want}" not in names:
                    fail(f"no {prefix}/{want}")
            if z.read(f"{prefix}/version") != b"3\n" or z.read(f"{prefix}/byteorder") != b"little":
                fail("version or byteorder text")
            raw = open(pth, "rb").read()
            for i in infos:
                nl, xl = struct.unpack("<HH", raw[i.header_offset + 26:i.header_offset + 30])
                if (i.header_offset + 30 + nl + xl) % 64:
                    fail(f"{i.filename}: data not at a multiple of 64")
            n_data = sum(1 for n in names if n.startswith(f"{prefix}/data/"))
        print(f"zip: {len(names)} STORED entries ({n_data} storages), CRC-32s right, "
              f"data 64-byte aligned, folder {prefix}/")

        kw = {"weights_only": True} if "weights_only" in inspect.signature(torch.load).parameters else {}
        sd = torch.load(pth, map_location="cpu", **kw)
        print(f"torch {torch.__version__}: torch.load({', '.join(f'{k}={v}' for k, v in kw.items()) or 'plain'})"
              f" gives a {type(sd).__module__}.{type(sd).__name__} of {len(sd)} entries")
        if not isinstance(sd, collections.OrderedDict):
            fail("not an OrderedDict")
        ref = read_safetensors(st)
        if list(sd.keys()) != list(ref.keys()):
            fail("names or their order differ from the safetensors file")
        n_values = 0
        for name, t in sd.items():
            want = torch.int64 if name.endswith("num_batches_tracked") else torch.float32
            if not isinstance(t, torch.Tensor) or t.dtype != want or t.device.type != "cpu":
                fail(f"{name}: {type(t)} {getattr(t, 'dtype', None)}")
            if not t.is_contiguous() or t.storage_offset() != 0 or t.requires_grad:
                fail(f"{name}: strided, offset or requires_grad")
            r = ref[name]
            if tuple(t.shape) != r.shape:
                fail(f"{name}: shape {tuple(t.shape)} vs {r.shape}")
            if t.numpy().tobytes() != r.tobytes():
                fail(f"{name}: values differ")
            n_values += r.size
        print(f"all {len(sd)} tensors ({n_values} values) bit-identical to the safetensors file, "
              "same names, order and shapes")
        print(f"{stem}: OK")


# the small test SAM, then MobileSAM (I64 num_batches_tracked scalars among the f32)
check("sam_vit_tiny", [])
check("mobile_sam", ["--layout", "mobile_sam"])
print("OK")
