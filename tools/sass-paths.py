#!/usr/bin/env python3
"""Instructions of the CUDA kernels' inner loops, counted in machine code.

Without a GPU, the machine code still says what a loop costs a weight:
this disassembles a cubin and prints, for each kernel named, its size,
its local-memory spills, its loops that hold integer dot products (IDP)
or tensor-core products (HMMA) with their instructions by opcode: of an
IDP loop, only the path for one activation row (from the loop's head to
the first conditional branch after its first product: the matrix-vector
products' `m >= nm` exit).

Usage:
  nvcc -cubin -O3 -std=c++17 -Xptxas -O3 -I backends/cuda/kernels \\
       -gencode arch=compute_90,code=sm_90 backends/cuda/kernels/matmul.cu -o /tmp/m.cubin
  tools/sass-paths.py [--nvdisasm PATH] [--abi7] /tmp/m.cubin rlx_mmvs_q4_k rlx_mmvs_q6_k

--abi7: the cubin's ELF header rewritten (in a copy) to the layout older
nvdisasm releases read (ABI version 7, the SM number in the low flag
bits), for a toolkit whose own nvdisasm is missing: CUDA 13's cubins
with the nvdisasm of Debian's nvidia-cuda-toolkit 11.8 (non-free).
"""
import argparse
import collections
import os
import re
import struct
import subprocess
import sys
import tempfile

INS = re.compile(r"\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
LABEL = re.compile(r"(\.L_x_\d+):")
TARGET = re.compile(r"BRA\s+`\((\.L_x_\d+)\)")


def abi7_copy(path):
    data = bytearray(open(path, "rb").read())
    if data[:4] != b"\x7fELF":
        sys.exit(f"{path}: not an ELF file")
    flags = struct.unpack_from("<I", data, 48)[0]
    if data[8] >= 8:  # CUDA 12.8+ layout: the SM number in bits 8-15
        sm = (flags >> 8) & 0xFF
        data[8] = 7
        struct.pack_into("<I", data, 48, sm | sm << 16 | 0x500)
    fd, tmp = tempfile.mkstemp(suffix=".cubin")
    os.write(fd, data)
    os.close(fd)
    return tmp


def kernels(text):
    """{name: [(opcode text) or ('label', name)]} from nvdisasm -c output"""
    out, cur = {}, None
    for line in text.split("\n"):
        m = re.match(r"\.text\.(\w+):", line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        if cur is None:
            continue
        if ".section" in line and ".text." in line:
            cur = None
            continue
        m = INS.match(line)
        if m:
            cur.append(m.group(2))
            continue
        m = LABEL.match(line.strip())
        if m:
            cur.append(("label", m.group(1)))
    return out


def opcode(ins):
    words = ins.split()
    if words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0]


def report(name, body):
    ins = [x for x in body if not isinstance(x, tuple)]
    labels, pos = {}, 0
    for x in body:
        if isinstance(x, tuple):
            labels[x[1]] = pos
        else:
            pos += 1
    stl = sum(opcode(x) == "STL" for x in ins)
    ldl = sum(opcode(x) == "LDL" for x in ins)
    print(f"{name}: {len(ins)} instructions, {stl} spill stores, {ldl} spill loads")
    for i, x in enumerate(ins):
        m = TARGET.search(x)
        if not m or labels.get(m.group(1), i + 1) > i:
            continue
        loop = ins[labels[m.group(1)]:i + 1]
        prods = [y for y in loop if opcode(y) in ("IDP", "HMMA")]
        if not prods or len(loop) > 4000:
            continue
        n, seen = len(loop), False
        if opcode(prods[0]) == "IDP":
            for k, y in enumerate(loop):
                seen |= opcode(y) == "IDP"
                if seen and y.startswith("@") and opcode(y) == "BRA":
                    n = k + 1
                    break
        hist = collections.Counter(opcode(y) for y in loop[:n])
        top = ", ".join(f"{k} {v}" for k, v in hist.most_common(10))
        what = f"one row's path {n}" if n < len(loop) else "all of it"
        print(f"  loop of {len(loop)} with {len(prods)} products; {what}: {top}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvdisasm", default="nvdisasm")
    ap.add_argument("--abi7", action="store_true")
    ap.add_argument("cubin")
    ap.add_argument("kernel", nargs="+")
    a = ap.parse_args()
    path = abi7_copy(a.cubin) if a.abi7 else a.cubin
    try:
        text = subprocess.run([a.nvdisasm, "-c", path], check=True, capture_output=True,
                              text=True).stdout
    except OSError as e:
        sys.exit(f"cannot run {a.nvdisasm}: {e}")
    except subprocess.CalledProcessError as e:
        hint = "" if a.abi7 else " (an nvdisasm older than the toolkit that built it: try --abi7)"
        sys.exit(f"{a.nvdisasm} could not read {a.cubin}{hint}: {e.stderr.strip()}")
    finally:
        if path != a.cubin:
            os.unlink(path)
    ks = kernels(text)
    for want in a.kernel:
        if want not in ks:
            sys.exit(f"no kernel {want} in {a.cubin}")
        report(want, ks[want])


if __name__ == "__main__":
    main()
