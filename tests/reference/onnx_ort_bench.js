// ONNX Runtime's side of tools/bench-isnet.sh: a model's run time on the CPU
// with a given intra-op thread count (npm onnxruntime-node@1.30.0):
//   NODE_PATH=.../node_modules node onnx_ort_bench.js MODEL.onnx INPUT_NAME IN.f32 D0,D1,.. THREADS RUNS
// One untimed run first (as rlx bench onnx does), then RUNS timed ones;
// prints each, then "median S s, fastest S s, CPU time S s per run" (the
// process's, every thread's: ONNX Runtime's workers spin while they wait,
// and that counts).
const ort = require('onnxruntime-node');
const fs = require('fs');
(async () => {
  const [model, inName, inFile, dims, threads, runs] = process.argv.slice(2);
  const s = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const buf = fs.readFileSync(inFile);
  const x = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const feeds = {[inName]: new ort.Tensor('float32', x, dims.split(',').map(Number))};
  await s.run(feeds);
  const t = [];
  const c0 = process.cpuUsage();
  for (let i = 0; i < Number(runs || 3); i++) {
    const t0 = process.hrtime.bigint();
    await s.run(feeds);
    t.push(Number(process.hrtime.bigint() - t0) / 1e9);
    console.log(`run ${i + 1}: ${t[i].toFixed(3)} s`);
  }
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / 1e6 / t.length; // every thread, spinning included
  t.sort((a, b) => a - b);
  const n = t.length, med = n % 2 ? t[(n - 1) / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
  console.log(`onnxruntime ${threads} threads: median ${med.toFixed(3)} s, fastest ${t[0].toFixed(3)} s, CPU time ${cpu.toFixed(3)} s per run`);
})();
