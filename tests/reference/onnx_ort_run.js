// ONNX Runtime as the oracle for `rlx run` (npm onnxruntime-node@1.30.0, whose
// bin/napi-v6/linux/x64 holds libonnxruntime.so.1):
//   npm install --ignore-scripts onnxruntime-node@1.30.0      (in some folder)
//   NODE_PATH=that/node_modules node onnx_ort_run.js MODEL.onnx INPUT_NAME IN.f32 D0,D1,.. OUT_NAME OUT.f32 [THREADS]
// IN.f32 / OUT.f32 are raw little-endian float32 (numpy's tofile); compare
// OUT.f32 with rlx run's DIR/OUT_NAME.npy (see tests/reference/onnx_compare.py).
const ort = require('onnxruntime-node');
const fs = require('fs');
(async () => {
  const [model, inName, inFile, dims, outName, outFile, threads] = process.argv.slice(2);
  const s = await ort.InferenceSession.create(model, {intraOpNumThreads: Number(threads || 0)});
  const buf = fs.readFileSync(inFile);
  const x = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const shape = dims.split(',').map(Number);
  const t0 = Date.now();
  const out = await s.run({[inName]: new ort.Tensor('float32', x, shape)});
  console.log(`onnxruntime ${ort.env.versions ? JSON.stringify(ort.env.versions) : ''} ran in ${(Date.now() - t0) / 1000} s`);
  const y = out[outName].data;
  fs.writeFileSync(outFile, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
})();
