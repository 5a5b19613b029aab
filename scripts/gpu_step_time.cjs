// Times ViTClassifier training steps on 'cuda' and prints one JSON line: the model, the GEMM backend
// that ran (cuda().backendInfo().gemm) and the median step time. Part of scripts/gpu_cublaslt.sh
// (run once with cuBLASLt and once with NF_CUBLASLT=0 in the same call, so both numbers come from
// the same card); from the unpacked package: `node gpu_step_time.cjs [vit-b16|seed] [batch] [steps]`.
// The loss returned by trainStep is read on the host, which waits for the step's work: the clock
// is read after the device has finished.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

// The package: this file's folder when it holds dist/ (copied into the unpacked package), else the checkout.
const pkg = process.env.NF_PKG_DIR || (fs.existsSync(path.join(__dirname, 'dist')) ? __dirname : path.resolve(__dirname, '..'));
const nf = require(path.join(pkg, 'dist', 'cjs', 'index.js'));
const { cuda } = require(path.join(pkg, 'dist', 'cjs', 'core', 'device.js'));

const [which = 'vit-b16', batchArg, stepsArg] = process.argv.slice(2);
const configs = {
  'vit-b16': { imgSize: 224, patchSize: 16, inChannels: 3, dModel: 768, numHeads: 12, dFF: 3072, depth: 12, numClasses: 1000 },
  seed: { imgSize: 32, patchSize: 4, inChannels: 3, dModel: 128, numHeads: 4, dFF: 512, depth: 4, numClasses: 10 },
  tiny: { imgSize: 8, patchSize: 4, inChannels: 3, dModel: 16, numHeads: 2, dFF: 24, depth: 1, numClasses: 3 },
};
const config = configs[which];
if (!config) throw new Error(`unknown model ${which}: ${Object.keys(configs).join(', ')}`);
const B = Number(batchArg || 64), steps = Number(stepsArg || 20);

const model = new nf.ViTClassifier({ ...config, dropout: 0, seed: 1, device: 'cuda' });
const opt = new nf.AdamW(model.parameters(), { lr: 1e-4 });
const n = B * config.inChannels * config.imgSize * config.imgSize;
const images = nf.Tensor.from(Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37)), [B, config.inChannels, config.imgSize, config.imgSize]).to('cuda');
const labels = nf.Tensor.from(Int32Array.from({ length: B }, (_, i) => i % config.numClasses), [B]).to('cuda');

for (let i = 0; i < 3; i++) nf.trainStep(model, opt, images, labels); // warm-up: allocator, heuristic cache
const ms = [];
let loss = 0;
for (let i = 0; i < steps; i++) {
  const t0 = process.hrtime.bigint();
  loss = nf.trainStep(model, opt, images, labels);
  ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
ms.sort((a, b) => a - b);
const gemm = cuda().backendInfo().gemm;
console.log(JSON.stringify({ model: which, batch: B, steps, medianMs: ms[Math.floor(ms.length / 2)], minMs: ms[0], loss,
  gemm: { backend: gemm.backend, library: gemm.library, version: gemm.version, calls: gemm.calls } }));
