#!/usr/bin/python3
"""PyTorch's speed on SAM, for tools/bench-sam.sh: the image encoder per image and
one click (prompt encoder + mask decoder), on the CPU, with the same weights and
input as `rlx bench sam` on a file written by tests/write-sam-model.

    /usr/bin/python3 tests/reference/sam_bench_torch.py [--layout vit_b] [--f16]
        [--threads T] [--runs N] [--check MODEL.safetensors] [--compare DIR] [--json]

The network is sam_reference.py's (written from the published segment_anything
modules, computing as they do: the full attention matrix with the decomposed
relative positions added, then softmax), set to a published layout (vit_b: D 768,
depth 12, 12 heads, global blocks 2 5 8 11; vit_l, vit_h); its weights come from
the generator described there, which tests/sam-writer.c also uses, so with
--layout vit_b they are those of `write-sam-model OUT --layout vit_b` (--f16: each
value rounded to F16 and back, as the F16 file holds it). --check reads a few
tensors from that file and stops unless they are bit-identical to ours.

Timing: torch.set_num_threads(T), torch.no_grad(); one warm-up run, then the
median and the fastest of N. A click is what SamPredictor.predict does for one
positive point with three proposals: the prompt encoder (with the grid's dense
positional encoding, which SamPredictor recomputes per click) and the mask
decoder, giving 3 low-resolution masks; "masks" is its postprocess_masks
(bilinear to 1024, crop, bilinear to the picture, here 1024 x 1024) and the
threshold at 0.

--compare DIR reads `rlx bench sam --dump DIR`'s embedding.f32 and click.f32 (the
reference image and the point 500,375) and prints how far they are from PyTorch's.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sam_reference as R  # noqa: E402

LAYOUTS = {
    'test': (64, 4, 2, (1, 3)),
    'vit_b': (768, 12, 12, (2, 5, 8, 11)),
    'vit_l': (1024, 24, 16, (5, 11, 17, 23)),
    'vit_h': (1280, 32, 16, (7, 15, 23, 31)),
}


def set_layout(name):
    R.D, R.DEPTH, R.HEADS, R.GLOBAL = LAYOUTS[name]


def make_weights(f16):
    W = {}
    for name, shape in R.specs():
        t = R.make(name, shape)
        if f16:
            t = torch.from_numpy(t.numpy().astype(np.float16).astype(np.float32))
        W[name] = t
    return W


def read_safetensors(path):
    with open(path, 'rb') as f:
        n = int.from_bytes(f.read(8), 'little')
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode='r', offset=8 + n)
    return header, data


def check(path, W, f16):
    """The file's tensors against ours, bit for bit: the names of those that differ."""
    header, data = read_safetensors(path)
    last = R.DEPTH - 1
    names = ['image_encoder.patch_embed.proj.weight', 'image_encoder.patch_embed.proj.bias',
             'image_encoder.pos_embed', 'image_encoder.blocks.%d.attn.qkv.weight' % last,
             'image_encoder.blocks.%d.mlp.lin1.weight' % last,
             'image_encoder.blocks.%d.norm2.weight' % last,
             'image_encoder.blocks.%d.attn.rel_pos_h' % R.GLOBAL[0],
             'image_encoder.neck.2.weight', 'mask_decoder.output_upscaling.0.weight',
             'mask_decoder.transformer.layers.1.mlp.lin2.weight',
             'prompt_encoder.pe_layer.positional_encoding_gaussian_matrix']
    bad = []
    for name in names:
        h = header.get(name)
        if h is None:
            bad.append(name + ' (missing: the file must have official names)')
            continue
        a, b = h['data_offsets']
        ours = W[name].numpy()
        if h['dtype'] == 'F16':
            theirs = np.frombuffer(data[a:b].tobytes(), '<f2')
            ours = ours.astype(np.float16)
            same = np.array_equal(theirs.view(np.uint16), ours.reshape(-1).view(np.uint16))
        else:
            theirs = np.frombuffer(data[a:b].tobytes(), '<f4')
            same = (not f16 and
                    np.array_equal(theirs.view(np.uint32), ours.reshape(-1).view(np.uint32)))
        if list(h['shape']) != list(W[name].shape) or not same:
            bad.append(name)
    return len(names), bad


def timed(fn, runs):
    fn()  # warm-up
    t = []
    for _ in range(runs):
        a = time.perf_counter()
        fn()
        t.append((time.perf_counter() - a) * 1e3)
    return statistics.median(t), min(t)


def click(emb, W, x, y):
    pe = R.dense_pe(W)
    sparse, dense = R.prompt_encoder([(x, y, 1)], None, W)
    return R.mask_decoder(emb, pe, sparse, dense, True, W)


def postprocess(masks):
    # SamPredictor.postprocess_masks for a 1024 x 1024 picture, then > 0
    m = F.interpolate(masks[None], (R.IMG, R.IMG), mode='bilinear', align_corners=False)
    m = m[..., :R.IMG, :R.IMG]
    m = F.interpolate(m, (R.IMG, R.IMG), mode='bilinear', align_corners=False)
    return m > 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--layout', default='vit_b', choices=sorted(LAYOUTS))
    ap.add_argument('--f16', action='store_true')
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--check')
    ap.add_argument('--compare')
    ap.add_argument('--json', action='store_true')
    a = ap.parse_args()
    set_layout(a.layout)
    torch.set_num_threads(a.threads)
    out = {'torch': torch.__version__, 'threads': a.threads, 'layout': a.layout,
           'runs': a.runs, 'f16': a.f16}
    t0 = time.perf_counter()
    W = make_weights(a.f16)
    out['weights_s'] = time.perf_counter() - t0
    out['params'] = sum(t.numel() for t in W.values())
    if a.check:
        n, bad = check(a.check, W, a.f16)
        if bad:
            sys.exit('sam_bench_torch: %s differs from the generated weights in %s'
                     % (a.check, ', '.join(bad)))
        out['checked'] = n
    img = torch.from_numpy(R.uniform('image', 3 * R.IMG * R.IMG).reshape(1, 3, R.IMG, R.IMG))
    with torch.no_grad():
        emb = [None]

        def encode():
            emb[0] = R.image_encoder(img, W)

        out['encode_ms'], out['encode_min_ms'] = timed(encode, a.runs)
        emb = emb[0]
        k = [0]
        masks = [None]

        def one_click():
            # a point that moves, as rlx bench sam's do
            r = k[0] = k[0] + 1
            masks[0] = click(emb, W, 96.0 + (r * 173) % 832, 96.0 + (r * 271) % 832)

        out['click_ms'], out['click_min_ms'] = timed(one_click, 4 * a.runs)
        out['masks_ms'], _ = timed(lambda: postprocess(masks[0][0]), 4 * a.runs)
        if a.compare:
            ours = np.fromfile(os.path.join(a.compare, 'embedding.f32'), '<f4')
            ref = emb[0].numpy().reshape(-1)
            out['embedding_max_abs_diff'] = float(np.abs(ours - ref).max())
            out['embedding_max_abs'] = float(np.abs(ref).max())
            out['embedding_rms_diff'] = float(np.sqrt(np.mean((ours - ref) ** 2)))
            m, iou = R.mask_decoder(emb, R.dense_pe(W), *R.prompt_encoder([(500.0, 375.0, 1)],
                                                                          None, W), True, W)
            c = np.fromfile(os.path.join(a.compare, 'click.f32'), '<f4')
            m = m.numpy().reshape(-1)
            out['click_iou_ours'] = [float(v) for v in c[:3]]
            out['click_iou_torch'] = [float(v) for v in iou.numpy()]
            out['click_max_abs_diff'] = float(np.abs(c[3:] - m).max())
            out['click_max_abs'] = float(np.abs(m).max())
            out['click_same_sign'] = float(np.mean((c[3:] > 0) == (m > 0)))
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print('torch     %s, %d threads, %s%s, %d params, weights generated in %.1f s%s'
          % (out['torch'], a.threads, a.layout, ' F16' if a.f16 else '', out['params'],
             out['weights_s'], ', %d tensors bit-identical to the file' % out['checked']
             if a.check else ''))
    print('encoder   %8.2f ms per image  (min %.2f)' % (out['encode_ms'], out['encode_min_ms']))
    print('click     %8.2f ms per click  (min %.2f; one point, 3 masks of 256x256)'
          % (out['click_ms'], out['click_min_ms']))
    print('masks     %8.2f ms per click  (postprocess_masks to 1024x1024, > 0)' % out['masks_ms'])
    if a.compare:
        print('compare   embedding: max |ours - torch| %.3g (rms %.3g; max |torch| %.3g)'
              % (out['embedding_max_abs_diff'], out['embedding_rms_diff'],
                 out['embedding_max_abs']))
        print('compare   click: max |ours - torch| %.3g (max |torch| %.3g), same sign %.4f%%; '
              'IoU ours %s torch %s'
              % (out['click_max_abs_diff'], out['click_max_abs'], 100 * out['click_same_sign'],
                 ' '.join('%.4f' % v for v in out['click_iou_ours']),
                 ' '.join('%.4f' % v for v in out['click_iou_torch'])))


if __name__ == '__main__':
    main()
