#!/usr/bin/python3
"""Reference pictures for tests/test-flux2.c: a whole seeded 2-step 256 x 256
FLUX.2 [klein] generation on the tiny random-weight model that
tests/write-flux2-model.c writes, composed from the three part references:

    /usr/bin/python3 tests/reference/flux2_pipeline_reference.py tests/fixtures [DATA_DIR]

  text encoder  flux2_text_reference.encode (Qwen3 in float64, hidden states
                9, 18, 27 joined; the model: hidden 64, 4 / 2 heads of 16,
                FFN 96, 28 layers, Qwen3's 151936-token vocabulary, BF16
                weights), the prompt padded to 512 tokens with <|endoftext|>
  schedule      flux2_text_reference.diffusers_sigmas (the klein pipeline's
                empirical mu for image_seq_len 256)
  noise         flux2_text_reference.noise: the formula of flux2-sched.h
                (xoshiro256** + Box-Muller), so that the same seed gives the
                same starting latents as rlx_flux2_noise (torch's generator
                cannot be matched), laid out as the packed [128][16][16]
  transformer   flux2_dit_reference.forward with its widths set to the tiny
                model's: hidden 256 (2 heads x 128), MLP 768, joint_dim 192,
                one double- and one single-stream block (BF16 weights)
  sampler       Euler: x += (sigma_next - sigma) * v; with classifier-free
                guidance (the base model) v = v_neg + g * (v - v_neg), as the
                klein pipeline does when not distilled and g > 1
  VAE           flux2_vae_reference.decoder with all block widths 32 (F16
                weights), after the BN de-normalization and unpatchify;
                (x / 2 + 0.5) clamped to [0, 1]
Everything in float64 from the files' exact values.

The prompt ids come from tokenizers/hf-qwen3/tokenizer.json: the template's
pieces (as flux2_text_reference.token_lines) around "a red cat" = a, Ġred,
Ġcat, and the negative "dark", each a whole token of the vocabulary (so
byte-level BPE cannot split them otherwise).

Fixtures (the picture 2 x 2 mean-pooled to 128 x 128, HWC RGB, rounded to
bytes; 48 KB each):
    flux2-pipeline-ref-distilled.u8   seed 7, 2 steps, no guidance
    flux2-pipeline-ref-base.u8        seed 7, 2 steps, guidance 4, negative "dark"
The C test compares its picture, pooled the same way, by PSNR.
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import flux2_dit_reference as dit  # noqa: E402
import flux2_text_reference as text  # noqa: E402
import flux2_vae_reference as vae  # noqa: E402

SIZE, STEPS, SEED, GUIDANCE = 256, 2, 7, 4.0
PROMPT, NEGATIVE = ['a', '\u0120red', '\u0120cat'], ['dark']
TEXT = dict(D=64, H=4, HKV=2, DH=16, F=96, NL=28, V=151936, theta=1e6, eps=1e-6,
            layers=(9, 18, 27), L=512, bf16=True)


def chat_ids(data, words):
    tj = json.load(open(os.path.join(data, 'tokenizers', 'hf-qwen3', 'tokenizer.json'),
                        encoding='utf-8'))
    added = {t['content']: t['id'] for t in tj['added_tokens']}
    vocab = tj['model']['vocab']
    nl, nl2 = vocab['\u010a'], vocab['\u010a\u010a']
    pre = [added['<|im_start|>'], vocab['user'], nl]
    post = [added['<|im_end|>'], nl, added['<|im_start|>'], vocab['assistant'], nl,
            added['<think>'], nl2, added['</think>'], nl2]
    return pre + [vocab[w] for w in words] + post, added['<|endoftext|>']


def set_tiny():
    dit.HIDDEN, dit.HEADS, dit.JOINT, dit.MLP = 256, 2, 3 * TEXT['D'], 768
    dit.N_DOUBLE, dit.N_SINGLE = 1, 1
    vae.CH = (32, 32, 32, 32)


def generate(W_dit, W_vae, cond, uncond, guidance):
    lh = lw = SIZE // 16
    _, sig = text.diffusers_sigmas(STEPS, lh * lw)
    x = torch.from_numpy(text.noise(SEED, 128 * lh * lw).astype(np.float64)).view(128, lh, lw)
    for i in range(STEPS):
        s, s_next = float(sig[i]), float(sig[i + 1])
        v = dit.forward(W_dit, x, [], cond, s)
        if uncond is not None:
            vn = dit.forward(W_dit, x, [], uncond, s)
            v = vn + guidance * (v - vn)
        x = x + (s_next - s) * v
    mean, std = vae.bn_stats(W_vae)
    lat = vae.unpatchify(x.view(1, 128, lh, lw) * std + mean)
    rgb = (vae.decoder(W_vae, lat) / 2 + 0.5).clamp(0, 1)[0]  # [3][H][W]
    pooled = rgb.view(3, SIZE // 2, 2, SIZE // 2, 2).mean((2, 4)).permute(1, 2, 0)
    return pooled.numpy()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else 'tests/fixtures'
    data = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, '..', '..', '..', 'shared',
                                                             'data')
    torch.set_grad_enabled(False)
    torch.set_num_threads(2)
    set_tiny()
    ids, pad = chat_ids(data, PROMPT)
    neg_ids, _ = chat_ids(data, NEGATIVE)
    text.PAD_ID = pad
    print('prompt ids %s, negative ids %s, pad %d' % (ids, neg_ids, pad))
    cond = text.encode(TEXT, ids).to(torch.float64)
    uncond = text.encode(TEXT, neg_ids).to(torch.float64)
    W_dit = dit.make_weights()
    W_vae = {k: v.double() for k, v in vae.weights().items()}
    for name, un in (('distilled', None), ('base', uncond)):
        img = generate(W_dit, W_vae, cond, un, GUIDANCE)
        b = np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
        path = os.path.join(out, 'flux2-pipeline-ref-%s.u8' % name)
        b.tofile(path)
        print('%s: mean %.4f, std %.4f, %.1f%% clamped' %
              (path, img.mean(), img.std(), 100.0 * float(((img == 0) | (img == 1)).mean())))


if __name__ == '__main__':
    main()
