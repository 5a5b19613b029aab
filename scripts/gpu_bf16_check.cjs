// The GPU check of precision 'bf16' (bfloat16 activations), part of scripts/gpu_bf16.sh; from the
// unpacked package: `node gpu_bf16_check.cjs [steps]`. Prints one JSON line with, for the seed-cifar
// ViTClassifier (32 px, patch 4, width 128, 4 blocks, 10 classes) at batch 64 on synthetic data
// (8 fixed batches of smooth random images whose label is the image's brightest channel and
// quadrant, so the model can learn):
//   - logits: the relative error of a bf16 forward on 'cuda' against the same model at fp32 on 'cpu'
//     (the bound: 3e-2), and of an fp32 forward on 'cuda' (1e-4);
//   - curve: `steps` (default 300) AdamW steps from the same initialisation at fp32 and at bf16 on
//     'cuda', every 10th loss, and the largest relative difference of the two curves (bound: 2%);
//   - bytes: the device bytes a training forward keeps at fp32 and at bf16 (cudaMemoryStats);
//   - ms: the median training step at fp32 and at bf16, on the same card in the same call.
// The loss returned by trainStep is read on the host, which waits for the step: clocks are read after
// the device has finished.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const pkg = process.env.NF_PKG_DIR || (fs.existsSync(path.join(__dirname, 'dist')) ? __dirname : path.resolve(__dirname, '..'));
const nf = require(path.join(pkg, 'dist', 'cjs', 'index.js'));
const { cudaMemoryStats } = require(path.join(pkg, 'dist', 'cjs', 'core', 'device.js'));

const steps = Number(process.argv[2] || 300);
const config = { imgSize: 32, patchSize: 4, inChannels: 3, dModel: 128, numHeads: 4, dFF: 512, depth: 4, numClasses: 10, dropout: 0, seed: 1 };
const B = 64, S = 32, C = 3;

// Batch k: smooth images (a few sines per channel) and labels 0..9 from their content.
function batch(k) {
  const x = new Float32Array(B * C * S * S), y = new Int32Array(B);
  let seed = 12345 + k * 7919;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  for (let b = 0; b < B; b++) {
    const label = Math.floor(rand() * 10), ch = label % 3, quad = Math.floor(label / 3) % 4;
    for (let c = 0; c < C; c++)
      for (let i = 0; i < S; i++)
        for (let j = 0; j < S; j++) {
          const inQuad = (i < S / 2 ? 0 : 2) + (j < S / 2 ? 0 : 1) === quad;
          x[((b * C + c) * S + i) * S + j] = 0.3 * Math.sin(i * (0.2 + rand() * 0.01) + c) + (c === ch && inQuad ? 1 : 0) + 0.2 * (rand() - 0.5);
        }
    y[b] = label;
  }
  return { x, y };
}
const batches = Array.from({ length: 8 }, (_, k) => batch(k));
const onDevice = (device) => batches.map(({ x, y }) => ({
  x: nf.Tensor.from(x, [B, C, S, S], device), y: nf.Tensor.from(y, [B], device),
}));

function relErr(a, b) {
  let num = 0, den = 0;
  for (let i = 0; i < b.length; i++) num += (a[i] - b[i]) ** 2, den += b[i] ** 2;
  return Math.sqrt(num / den);
}

function model(device, precision) {
  const m = new nf.ViTClassifier({ ...config, device, precision });
  return { m, opt: new nf.AdamW(m.parameters(), { lr: 1e-3, weightDecay: 0.05 }) };
}

// Logits against the CPU at fp32.
const ref = model('cpu', 'fp32').m.forward(onDevice('cpu')[0].x).toArray();
const logits = {};
for (const precision of ['fp32', 'bf16']) {
  const { m } = model('cuda', precision);
  logits[precision] = relErr(m.forward(onDevice('cuda')[0].x).toArray(), ref);
  m.dispose();
}

// Loss curves, bytes, step times.
const data = onDevice('cuda');
const curve = {}, bytes = {}, ms = {};
for (const precision of ['fp32', 'bf16']) {
  const { m, opt } = model('cuda', precision);
  const losses = [], times = [];
  for (let s = 0; s < steps; s++) {
    const { x, y } = data[s % data.length];
    const t0 = process.hrtime.bigint();
    losses.push(nf.trainStep(m, opt, x, y));
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  curve[precision] = losses;
  times.splice(0, 5); // warm-up: allocator, cuBLASLt heuristics
  times.sort((a, b) => a - b);
  ms[precision] = times[Math.floor(times.length / 2)];
  m.eval().forward(data[0].x).dispose(); // frees the last step's activations
  m.train();
  const before = cudaMemoryStats().requestedBytes;
  const out = m.forward(data[0].x);
  bytes[precision] = cudaMemoryStats().requestedBytes - before;
  out.dispose();
  m.dispose();
}
const worst = Math.max(...curve.fp32.map((l, i) => Math.abs(curve.bf16[i] - l) / l));
console.log(JSON.stringify({
  steps, logits, worstCurveDiff: worst, bytes, ms,
  curve: { fp32: curve.fp32.filter((_, i) => i % 10 === 0), bf16: curve.bf16.filter((_, i) => i % 10 === 0) },
  final: { fp32: curve.fp32.at(-1), bf16: curve.bf16.at(-1) },
}));
