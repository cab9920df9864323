#!/usr/bin/python3
"""Tiny PyTorch checkpoints for tests/test-torch-zip.c, written by torch.save
itself (Debian's python3-torch), and the values they hold as JSON.

    /usr/bin/python3 tests/reference/make-torch-fixtures.py tests/fixtures/torch

writes, into that folder:
  torch-basic.pt      OrderedDict: f32, f16, bf16, i64, f64, i32, u8 and bool
                      tensors, a view sharing a storage at a non-zero offset, a
                      transposed (strided) view, a 0-d tensor, a Parameter and
                      a non-tensor value (an int)
  torch-nested.pt     {"model": {...with a nested dict and a list...}, "epoch": 3}
  sam_vit_b_tiny.pth  a plain dict, saved under another archive folder name
  torch-state-dict.pt an nn.Module's state_dict (OrderedDict with _metadata)
  torch-zip64.pt      torch-basic.pt's entries re-packed (by hand, below) with
                      zip64 sizes, offsets and end records
  torch-evil.pt       a torch-shaped zip whose data.pkl calls os.system
  torch-compressed.pt torch-basic.pt's entries deflated
  torch-offset.pt     a tensor whose storage offset runs past its storage
  torch-expected.json per good fixture: prefix, root, and each tensor's name,
                      dtype, shape, stride, storage offset, contiguity and
                      values (row-major, as Python floats / ints)
"""
import collections
import json
import os
import pickle
import struct
import sys
import zipfile
import zlib

import torch

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/torch"
os.makedirs(out, exist_ok=True)
torch.manual_seed(1234)

DT = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
    torch.uint8: "U8", torch.bool: "BOOL",
}


def describe(state):
    """What the reader must find: flattened like the C reader names them."""
    res = []

    def walk(prefix, v):
        if isinstance(v, torch.Tensor):
            vals = v.detach().reshape(-1).tolist()
            if v.dtype == torch.bool:
                vals = [int(x) for x in vals]
            res.append({
                "name": prefix, "dtype": DT[v.dtype], "shape": list(v.shape),
                "stride": list(v.stride()), "storage_offset": v.storage_offset(),
                "contiguous": v.is_contiguous(), "values": vals,
                "requires_grad": bool(v.requires_grad),
            })
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(f"{prefix}.{i}" if prefix else str(i), x)

    walk("", state)
    return res


expected = {}

# ---- torch-basic.pt --------------------------------------------------------
base = torch.randn(12)
grid = torch.randn(3, 4)
basic = collections.OrderedDict()
basic["w_f32"] = torch.randn(2, 3)
basic["w_f16"] = torch.randn(4, 2).half()
basic["w_bf16"] = torch.randn(5).bfloat16()
basic["ids_i64"] = torch.tensor([0, -1, 2**40 + 3, -(2**62), 7], dtype=torch.int64)
basic["w_f64"] = torch.randn(2, 2, dtype=torch.float64)
basic["n_i32"] = torch.tensor([[1, -2], [3, 2**31 - 1]], dtype=torch.int32)
basic["px_u8"] = torch.tensor([0, 128, 255], dtype=torch.uint8)
basic["mask"] = torch.tensor([True, False, True])
basic["base"] = base
basic["view"] = base[5:9]            # shares base's storage, offset 5
basic["row"] = grid[1]               # offset 4 into grid's storage
basic["grid_t"] = grid.t()           # strided: stride (1, 4)
basic["scalar"] = torch.tensor(2.5)  # 0-d
basic["param"] = torch.nn.Parameter(torch.randn(3))
basic["step"] = 7                    # not a tensor: skipped
torch.save(basic, os.path.join(out, "torch-basic.pt"))
expected["torch-basic.pt"] = {"prefix": "torch-basic/", "root": "",
                              "tensors": describe(basic)}

# ---- torch-nested.pt: SAM 2's {"model": state_dict} shape -------------------
inner = collections.OrderedDict()
inner["enc.proj.weight"] = torch.randn(2, 2)
inner["blocks"] = {"0": {"norm.weight": torch.ones(3)}, "1": {"norm.weight": torch.zeros(3)}}
inner["heads"] = [torch.arange(4, dtype=torch.float32), torch.full((2,), -1.5)]
nested = {"model": inner, "epoch": 3, "note": "tiny"}
torch.save(nested, os.path.join(out, "torch-nested.pt"))
expected["torch-nested.pt"] = {"prefix": "torch-nested/", "root": "model",
                               "tensors": describe(inner)}

# ---- sam_vit_b_tiny.pth: a plain dict, another folder name ------------------
plain = {"image_encoder.pos_embed": torch.randn(1, 2, 2, 3),
         "mask_decoder.iou_token.weight": torch.randn(1, 4).half()}
torch.save(plain, os.path.join(out, "sam_vit_b_tiny.pth"))
expected["sam_vit_b_tiny.pth"] = {"prefix": "sam_vit_b_tiny/", "root": "",
                                  "tensors": describe(plain)}

# ---- torch-state-dict.pt: a module's state_dict, as SAM's files are --------
# (its OrderedDict carries _metadata, which the pickle sets with BUILD; the
# BatchNorm adds a 0-d int64 num_batches_tracked)
module = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2),
                             torch.nn.BatchNorm1d(2))
sd = module.state_dict()
torch.save(sd, os.path.join(out, "torch-state-dict.pt"))
expected["torch-state-dict.pt"] = {"prefix": "torch-state-dict/", "root": "",
                                   "tensors": describe(sd)}


# ---- a hand-written zip writer (for zip64 and for the hostile files) --------
def write_zip(path, entries, zip64=False, method=0):
    """entries: [(name, bytes)]. method 0 = stored, 8 = deflate."""
    body = bytearray()
    cdir = bytearray()
    for name, data in entries:
        nb = name.encode()
        crc = zlib.crc32(data) & 0xFFFFFFFF
        if method == 8:
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            payload = c.compress(data) + c.flush()
        else:
            payload = data
        off = len(body)
        if zip64:
            lextra = struct.pack("<HHQQ", 1, 16, len(data), len(payload))
            body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, method, 0, 0, crc,
                                0xFFFFFFFF, 0xFFFFFFFF, len(nb), len(lextra)) + nb + lextra
        else:
            body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc,
                                len(payload), len(data), len(nb), 0) + nb
        body += payload
        if zip64:
            cextra = struct.pack("<HHQQQ", 1, 24, len(data), len(payload), off)
            cdir += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, method, 0, 0, crc,
                                0xFFFFFFFF, 0xFFFFFFFF, len(nb), len(cextra), 0, 0, 0, 0,
                                0xFFFFFFFF) + nb + cextra
        else:
            cdir += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc,
                                len(payload), len(data), len(nb), 0, 0, 0, 0, 0, off) + nb
    cd_off = len(body)
    out_b = body + cdir
    n = len(entries)
    if zip64:
        z64 = len(out_b)
        out_b += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(cdir), cd_off)
        out_b += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
        out_b += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                             0xFFFFFFFF, 0)
    else:
        out_b += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(cdir), cd_off, 0)
    with open(path, "wb") as f:
        f.write(out_b)


def entries_of(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


basic_entries = entries_of(os.path.join(out, "torch-basic.pt"))
write_zip(os.path.join(out, "torch-zip64.pt"),
          [(n.replace("torch-basic/", "torch-zip64/"), d) for n, d in basic_entries], zip64=True)
expected["torch-zip64.pt"] = dict(expected["torch-basic.pt"], prefix="torch-zip64/")
write_zip(os.path.join(out, "torch-compressed.pt"),
          [(n.replace("torch-basic/", "torch-compressed/"), d) for n, d in basic_entries],
          method=8)


# ---- torch-evil.pt: data.pkl would run a shell command if unpickled ---------
class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


evil_pkl = pickle.dumps(collections.OrderedDict(w=Evil()), protocol=2)
assert b"system" in evil_pkl
write_zip(os.path.join(out, "torch-evil.pt"),
          [("archive/data.pkl", evil_pkl), ("archive/version", b"3\n")])


# ---- torch-offset.pt: a view past the end of its storage --------------------
class FakeStorage:
    pass


class FakeTensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class TorchLikePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, FakeStorage):
            return ("storage", torch.FloatStorage, "0", "cpu", 4)
        return None


def torch_like_pickle(obj):
    import io
    buf = io.BytesIO()
    TorchLikePickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


st = FakeStorage()
off_pkl = torch_like_pickle(collections.OrderedDict(ok=FakeTensor(st, 0, (4,), (1,)),
                                                    bad=FakeTensor(st, 2, (4,), (1,))))
write_zip(os.path.join(out, "torch-offset.pt"),
          [("archive/data.pkl", off_pkl), ("archive/data/0", struct.pack("<4f", 1, 2, 3, 4)),
           ("archive/version", b"3\n")])

with open(os.path.join(out, "torch-expected.json"), "w") as f:
    json.dump(expected, f, indent=1)
    f.write("\n")
for name in sorted(os.listdir(out)):
    print(f"{os.path.getsize(os.path.join(out, name)):8d}  {name}")
