"""A small GGUF reader for the reference scripts, written from the format's
published description (not librlx): the metadata and the tensor directory.

    kv, tensors, data, base = read(path)

kv: {key: value} (strings as bytes, arrays as lists); tensors: a list of
(name, ne, ggml_type, offset); the tensor bytes start at data[base + offset].
"""
import struct

# GGUF value types with a fixed size, as struct codes
_SCALAR = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?',
           10: 'Q', 11: 'q', 12: 'd'}


def read(path):
    with open(path, 'rb') as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from('<' + fmt, data, pos)
        pos += struct.calcsize('<' + fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take('Q')
        s = data[pos:pos + n]
        pos += n
        return s

    def value(t):
        if t in _SCALAR:
            return take(_SCALAR[t])[0]
        if t == 8:
            return string()
        if t == 9:
            et, n = take('IQ')
            return [value(et) for _ in range(n)]
        raise ValueError('bad type %d' % t)

    assert data[:4] == b'GGUF'
    pos = 4
    (version,) = take('I')
    assert version in (2, 3)
    n_tensors, n_kv = take('QQ')
    kv = {}
    for _ in range(n_kv):
        k = string().decode()
        (t,) = take('I')
        kv[k] = value(t)
    tensors = []
    for _ in range(n_tensors):
        name = string().decode()
        (n_dims,) = take('I')
        ne = take('Q' * n_dims)
        gtype, offset = take('IQ')
        tensors.append((name, ne, gtype, offset))
    align = kv.get('general.alignment', 32)
    base = (pos + align - 1) // align * align
    return kv, tensors, data, base
