/**
 * CUDA graphs (lib/core/graph.ts, native/cuda/device.h) on the SIMT emulator, whose stream capture
 * records and replays what a GPU's would (native/cuda/emulator/capture.h): N training steps of a
 * ViTClassifier with graphs give bit for bit the losses and weights of N eager steps (AdamW under a
 * changing learning-rate schedule, dropout on, gradient clipping on), and replays are what ran
 * them; a new batch shape is captured again; `cudaGraphs: false` and setCudaGraphs(false) turn them
 * off; memory stays flat over many replays; a NaN loss comes back as eager returns it; trainStepAsync
 * and eval-mode forwards replay too; what cannot be captured (SGD, attention-weight dropout) runs
 * eagerly with its reason counted, with the eager results; precision 'bf16' (bfloat16 activations, the
 * weights' bf16 copies recast inside every replay) replays with the eager results too. The matrix products run through the
 * cuBLASLt stand-in (NF_CUBLASLT=0: the own kernels).
 */
import { beforeAll, describe, expect, it } from 'vitest';

import {
  AdamW, cudaGraphStats, cudaMemoryStats, setCudaGraphs, SGD, Tensor, trainStep, trainStepAsync, ViTClassifier,
  type ViTClassifierConfig,
} from '../lib/index';
import { cuda } from '../lib/core/device';
import { randn32, rng } from './helpers';
import { cublasltStandIn, emulatorSkipReason, useEmulator } from './support/cuda_emu_build';

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the CUDA graph tests: ${reason}`);

/** Residual and MLP dropout on; attention-weight dropout off (it cannot be captured, see the last test). */
const CONFIG: ViTClassifierConfig = {
  imgSize: 8, patchSize: 4, inChannels: 3, dModel: 24, numHeads: 2, dFF: 40, depth: 2, numClasses: 5, seed: 3,
  dropout: 0.2, attnDropout: 0, device: 'cuda',
};
const lrAt = (step: number) => 2e-2 * (1 + Math.cos(step)); // a schedule that changes every step

function batch(B: number, seed: number) {
  const r = rng(seed);
  return {
    images: Tensor.from(Float32Array.from(randn32(B * 3 * 8 * 8, r)), [B, 3, 8, 8], 'cuda'),
    targets: Tensor.from(Int32Array.from({ length: B }, (_, i) => (i * 3 + seed) % 5), [B], 'cuda'),
  };
}

interface Run {
  losses: number[];
  weights: Float32Array[];
}

/** `steps` training steps (batch size B, or a list of sizes), graphs on or off. */
function train(graphs: boolean, sizes: number[], opts: { config?: Partial<ViTClassifierConfig>; sgd?: boolean } = {}): Run {
  const model = new ViTClassifier({ ...CONFIG, ...opts.config });
  const opt = opts.sgd ? new SGD(model.parameters(), { lr: 0.05, momentum: 0.9 }) : new AdamW(model.parameters(), { lr: 1e-2 });
  const losses = sizes.map((B, step) => {
    opt.options.lr = lrAt(step);
    const { images, targets } = batch(B, step);
    return trainStep(model, opt, images, targets, { maxGradNorm: 0.05, cudaGraphs: graphs });
  });
  return { losses, weights: model.parameters().map((p) => p.toArray()) };
}

function expectSame(a: Run, b: Run): void {
  expect(a.losses).toEqual(b.losses);
  a.weights.forEach((w, i) => expect(Buffer.from(w.buffer).equals(Buffer.from(b.weights[i].buffer)), `parameter ${i}`).toBe(true));
}

describe.skipIf(reason !== null)('CUDA graphs on the SIMT emulator', () => {
  beforeAll(async () => {
    await useEmulator();
    // The products through the cuBLASLt stand-in, whose calls a capture records as host work (the
    // own kernels' launches are recorded like every kernel's: NF_CUBLASLT=0 runs them instead).
    if (process.env.NF_CUBLASLT !== '0') process.env.NF_CUBLASLT_PATH ??= cublasltStandIn;
  }, 900_000);

  it('N captured steps give the losses and weights of N eager steps, bit for bit, and replays ran them', () => {
    const N = 7;
    const eager = train(false, Array(N).fill(4));
    const before = cudaGraphStats(), launches = cuda().backendInfo().graphs.launches;
    const graphed = train(true, Array(N).fill(4));
    const after = cudaGraphStats();
    expectSame(graphed, eager);
    expect(after.captures - before.captures).toBe(1);
    // Step 1 warms up; step 2 has gradients where step 1 had none (another key), step 3 is captured.
    expect(after.replays - before.replays).toBe(N - 2);
    expect(cuda().backendInfo().graphs.launches - launches).toBe(N - 2);
    expect(graphed.losses.every(Number.isFinite)).toBe(true);
  });

  it("precision 'bf16': N replayed steps give the eager losses and weights bit for bit; the weights' bf16 copies stay current in every replay", () => {
    // The capture finds the weights' bf16 copies (Parameter.storageFor) current — AdamW wrote them
    // with the weights (adamwMultiStep's copy), and with `evalAfter` an eval forward after that step
    // reads them too — so it reads them as they are, and the replays' own AdamW keeps them current
    // (no eager cast runs between the replays: test/optim_multi.test.ts counts them).
    const N = 7, probe = batch(2, 99).images;
    const run = (graphs: boolean, evalAfter?: number) => {
      const model = new ViTClassifier({ ...CONFIG, precision: 'bf16' }), opt = new AdamW(model.parameters(), { lr: 1e-2 });
      const losses: number[] = [];
      for (let step = 0; step < N; step++) {
        opt.options.lr = lrAt(step);
        const { images, targets } = batch(4, step);
        losses.push(trainStep(model, opt, images, targets, { maxGradNorm: 0.05, cudaGraphs: graphs }));
        if (step === evalAfter) {
          const logits = model.eval().forward(probe);
          expect(logits.dtype).toBe('bfloat16');
          logits.dispose();
          model.train();
        }
      }
      const out = { losses, weights: model.parameters().map((p) => p.toArray()) };
      model.dispose();
      return out;
    };
    for (const evalAfter of [undefined, 1]) {
      const eager = run(false, evalAfter);
      const before = cudaGraphStats();
      const graphed = run(true, evalAfter);
      const after = cudaGraphStats();
      expect(after.captures - before.captures).toBe(1);
      expect(after.replays - before.replays).toBe(N - 2);
      expectSame(graphed, eager);
      expect(graphed.losses.every(Number.isFinite)).toBe(true);
    }
  });

  it("precision 'bf16': an eval forward replayed after the weights were loaded reads the new weights", () => {
    const model = new ViTClassifier({ ...CONFIG, precision: 'bf16' }).eval(), probe = batch(2, 98).images;
    const before = cudaGraphStats();
    for (let i = 0; i < 3; i++) model.forward(probe).dispose(); // eager, captured (and launched), replayed
    for (const p of model.parameters()) p.copyFrom(p.toArray().map((v) => 0.5 * v + 0.01));
    const replayed = model.forward(probe).toArray();
    expect(cudaGraphStats().replays - before.replays).toBe(3);
    setCudaGraphs(false);
    try {
      expect(replayed).toEqual(model.forward(probe).toArray());
    } finally {
      setCudaGraphs(true);
      model.dispose();
    }
  });

  it('a new batch shape runs eagerly once, is captured again, and the old graph is kept', () => {
    const sizes = [4, 4, 4, 4, 3, 3, 3, 4, 3];
    const before = cudaGraphStats();
    const graphed = train(true, sizes);
    const after = cudaGraphStats();
    expectSame(graphed, train(false, sizes));
    expect(after.captures - before.captures).toBe(2);
    expect(after.replays - before.replays).toBe(2 + 2 + 1 + 1); // 4: steps 3-4; 3: steps 6-7; then one of each
  });

  it('a new precision, a mode switch or a moved model is a new key: one eager run, then captured again', () => {
    const model = new ViTClassifier(CONFIG), opt = new AdamW(model.parameters(), { lr: 1e-3 });
    const { images, targets } = batch(4, 0);
    const steps = (n: number) => Array.from({ length: n }, () => trainStep(model, opt, images, targets));
    steps(4); // warm-up, new key (gradients), capture, replay
    let before = cudaGraphStats();
    model.setPrecision('tf32');
    steps(3);
    expect(cudaGraphStats().captures - before.captures).toBe(1);
    expect(cudaGraphStats().replays - before.replays).toBe(2);
    before = cudaGraphStats();
    model.to('cpu').to('cuda'); // new parameter storages: the old graph must not run on freed memory
    steps(3);
    expect(cudaGraphStats().captures - before.captures).toBe(1);
    before = cudaGraphStats();
    model.eval();
    for (let i = 0; i < 3; i++) model.forward(images).dispose();
    model.train();
    expect(cudaGraphStats().captures - before.captures).toBe(1); // the eval forward's own graph
  });

  it('cudaGraphs: false and setCudaGraphs(false) run every step eagerly', () => {
    let before = cudaGraphStats();
    train(false, [4, 4, 4, 4]);
    expect(cudaGraphStats().replays).toBe(before.replays);
    setCudaGraphs(false);
    try {
      before = cudaGraphStats();
      train(true, [4, 4, 4, 4]);
      expect(cudaGraphStats().replays).toBe(before.replays);
    } finally {
      setCudaGraphs(true);
    }
  });

  it('memory stays flat over many replays', () => {
    const model = new ViTClassifier(CONFIG);
    const opt = new AdamW(model.parameters(), { lr: 1e-3 });
    const { images, targets } = batch(4, 1);
    for (let i = 0; i < 4; i++) trainStep(model, opt, images, targets, { maxGradNorm: 1 });
    const before = cudaMemoryStats(), replays = cudaGraphStats().replays;
    for (let i = 0; i < 30; i++) trainStep(model, opt, images, targets, { maxGradNorm: 1 });
    const after = cudaMemoryStats();
    expect(cudaGraphStats().replays - replays).toBe(30);
    expect(after.fresh).toBe(before.fresh);
    expect(after.liveBytes).toBe(before.liveBytes);
    expect(after.graphBytes).toBe(before.graphBytes);
    expect(after.cachedBytes).toBe(before.cachedBytes);
  });

  it('a NaN loss comes back from a replay as from an eager step', () => {
    const losses = (graphs: boolean) => {
      const model = new ViTClassifier(CONFIG);
      const opt = new AdamW(model.parameters(), { lr: 1e-3 });
      const { images, targets } = batch(4, 2);
      const bad = Tensor.from(new Float32Array(4 * 3 * 8 * 8).fill(NaN), [4, 3, 8, 8], 'cuda');
      return [images, images, images, images, bad, images].map((x) => trainStep(model, opt, x, targets, { cudaGraphs: graphs }));
    };
    const before = cudaGraphStats().replays;
    const graphed = losses(true);
    expect(cudaGraphStats().replays - before).toBe(4);
    expect(graphed).toEqual(losses(false));
    expect(graphed[4]).toBeNaN();
  });

  it('trainStepAsync replays too, with the eager results', async () => {
    const run = async (graphs: boolean) => {
      const model = new ViTClassifier(CONFIG);
      const opt = new AdamW(model.parameters(), { lr: 1e-2 });
      const losses: number[] = [];
      for (let step = 0; step < 5; step++) {
        opt.options.lr = lrAt(step);
        const { images, targets } = batch(4, step);
        losses.push(await trainStepAsync(model, opt, images, targets, { maxGradNorm: 0.05, cudaGraphs: graphs }));
      }
      return { losses, weights: model.parameters().map((p) => p.toArray()) };
    };
    const before = cudaGraphStats().replays;
    const graphed = await run(true);
    expect(cudaGraphStats().replays - before).toBe(3);
    expectSame(graphed, await run(false));
  });

  it('eval-mode forwards replay, each result a new tensor equal to the eager one', async () => {
    const model = new ViTClassifier(CONFIG).eval();
    const outs: Float32Array[] = [], eager: Float32Array[] = [];
    const before = cudaGraphStats().replays;
    for (let i = 0; i < 4; i++) outs.push(model.forward(batch(4, i).images).toArray());
    outs.push((await model.forwardAsync(batch(4, 4).images)).toArray());
    expect(cudaGraphStats().replays - before).toBe(4);
    setCudaGraphs(false);
    try {
      for (let i = 0; i < 5; i++) eager.push(model.forward(batch(4, i).images).toArray());
    } finally {
      setCudaGraphs(true);
    }
    expect(outs).toEqual(eager);
  });

  it('SGD and attention-weight dropout cannot be captured: those steps run eagerly, reason counted', () => {
    for (const [opts, why] of [[{ sgd: true }, /^SGD/], [{ config: { attnDropout: 0.1 } }, /^attention-weight dropout/]] as const) {
      const before = cudaGraphStats();
      const graphed = train(true, [4, 4, 4, 4], opts);
      const after = cudaGraphStats();
      expect(after.replays).toBe(before.replays);
      const reasons = Object.keys(after.fallbacks).filter((r) => why.test(r));
      expect(reasons.length).toBe(1);
      expect(after.fallbacks[reasons[0]] - (before.fallbacks[reasons[0]] ?? 0)).toBe(2); // steps 3 and 4 (step 3 tried)
      expectSame(graphed, train(false, [4, 4, 4, 4], opts));
    }
  });
});
