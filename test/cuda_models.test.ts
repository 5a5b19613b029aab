/**
 * Every model on device 'cuda' through the SIMT emulator (NF_CUDA_BACKEND=emulator; the build step
 * is test/support/cuda_emu_build.ts's, shared with test/cuda_device.test.ts), against the same
 * steps on 'cpu': ViTDecoder (masks, dTokens, masked MSE), the masked-autoencoder example
 * (examples/mae.ts, two steps), checkFinite mode (the firstNonFinite kernel), Encoder and Decoder on their own, and the Transformer (padding,
 * dropout, pre-LN and post-LN, learned and sinusoidal positions) trained with SGD + momentum and
 * gradient clipping, then AdamW, and decoded greedily with and without the key/value caches.
 * Outputs, every gradient and every updated parameter must match within a relative error of 1e-4
 * (the largest per kind is printed). Also: configs take `device`, a CUDA model saves the same
 * checkpoint bytes as the CPU one, the caching allocator reuses blocks across training steps
 * (stats printed), and the ...Async twins leave the event loop free while the emulator works.
 * Shapes are tiny: the emulator runs every GPU thread on the CPU.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { MAE_MODEL, runMae } from '../examples/mae';
import {
  AdamW, clipGradNorm, crossEntropy, cudaEmptyCache, cudaMemoryStats, Decoder, Encoder, Linear, mse, saveModel, setCheckFinite,
  SGD, Tensor, Transformer, trainStep, ViTClassifier, ViTDecoder, ViTEncoder, loadModel, type Device, type Module,
} from '../lib/index';
import { cuda } from '../lib/core/device';
import { failure, randn32, relErr, rng } from './helpers';
import { buildEmulated, emulatorSkipReason } from './support/cuda_emu_build';

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the models-on-cuda emulator tests: ${reason}`);

const TOL = 1e-4;

function floats(n: number, seed: number, shape: number[], scale = 1): Tensor<'float32'> {
  return Tensor.from(Float32Array.from(randn32(n, rng(seed), scale)), shape);
}
const ints = (values: number[], shape: number[]) => Tensor.from(Int32Array.from(values), shape);
const grads = (m: Module) => Object.fromEntries(m.namedParameters().map(([n, p]) => [n, p.grad ? p.grad.toArray() : new Float32Array()]));
const params = (m: Module) => Object.fromEntries(m.namedParameters().map(([n, p]) => [n, p.toArray()]));

describe.skipIf(reason !== null)("every model on device 'cuda' (SIMT emulator) matches the CPU", () => {
  const errors: [string, number][] = [];
  const close = (label: string, got: ArrayLike<number>, want: ArrayLike<number>, tol = TOL) => {
    expect(got.length, label).toBe(want.length);
    const e = relErr(got, want);
    errors.push([label, e]);
    expect(e, label).toBeLessThan(tol);
  };
  const closeAll = (label: string, got: Record<string, ArrayLike<number>>, want: Record<string, ArrayLike<number>>, tol = TOL) => {
    expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
    for (const name of Object.keys(want)) close(`${label} ${name}`, got[name], want[name], tol);
  };

  beforeAll(async () => {
    const build = await buildEmulated();
    expect(build.ok, build.out).toBe(true);
    process.env.NF_CUDA_BACKEND = 'emulator';
    expect(cuda().backendInfo().emulated).toBe(true);
  }, 900_000);

  afterAll(() => {
    const kinds = new Map<string, [string, number]>();
    for (const [label, e] of errors) {
      const kind = label.split(' ').slice(0, 2).join(' ');
      if (!kinds.has(kind) || e > kinds.get(kind)![1]) kinds.set(kind, [label, e]);
    }
    for (const [kind, [label, e]] of kinds) console.log(`cuda vs cpu, largest relative error (${kind}): ${e.toExponential(2)} (${label})`);
  });

  it('configs take device: parameters (and buffers) are created there, as .to(device) after construction', () => {
    const vit = { imgSize: 8, patchSize: 4, inChannels: 1, dModel: 16, numHeads: 2, dFF: 24, depth: 1, numClasses: 3, seed: 5 };
    const onCuda = new ViTClassifier({ ...vit, device: 'cuda' }), moved = new ViTClassifier(vit).to('cuda');
    expect(onCuda.device).toBe('cuda');
    expect(new Set(onCuda.parameters().map((p) => p.device))).toEqual(new Set(['cuda']));
    closeAll('config-device params', params(onCuda), params(moved));
    expect(onCuda.config).not.toHaveProperty('device'); // not saved with the config (checkpoints stay portable)
    for (const make of [() => new Linear({ inFeatures: 3, outFeatures: 2, device: 'cuda' }),
      () => new Encoder({ vocabSize: 5, maxLen: 4, dModel: 8, numHeads: 2, dFF: 8, depth: 1, device: 'cuda' }),
      () => new Transformer({ srcVocab: 5, tgtVocab: 6, maxLen: 4, dModel: 8, numHeads: 2, dFF: 8, depth: 1, device: 'cuda' })]) {
      const m = make();
      expect(m.modules().every((x) => x.device === 'cuda')).toBe(true);
      expect(new Set(m.parameters().map((p) => p.device))).toEqual(new Set(['cuda']));
      m.dispose();
    }
    expect(() => new Linear({ inFeatures: 3, outFeatures: 2, device: 'gpu' as Device })).toThrowError(/Expected 'cpu' or 'cuda' for config\.device/);
    expect(() => new Linear({ inFeatures: 3, outFeatures: 2, devise: 'cuda' } as never)).toThrowError(/'devise' \(did you mean 'device'\?\)/);
    onCuda.dispose();
    moved.dispose();
  });

  it('ViTDecoder (attention and padding masks, dTokens, masked MSE, AdamW) trains as on the CPU', () => {
    const config = { imgSize: 8, patchSize: 2, inChannels: 2, dModel: 24, numHeads: 2, dFF: 40, depth: 2, seed: 9 };
    const B = 2, N = 16, Tm = 5, pixels = 8;
    const memory = floats(B * Tm * 24, 1, [B, Tm, 24]), target = floats(B * N * pixels, 2, [B, N, pixels]);
    const dTokens = floats(B * N * 24, 3, [B, N, 24], 0.1);
    const rowMask = Tensor.from(Uint8Array.from({ length: B * N }, (_, i) => (i % 3 === 0 ? 1 : 0)), [B, N]);
    const memoryPad = Tensor.from(Uint8Array.from([0, 0, 1, 0, 1, 0, 0, 0, 0, 1]), [B, Tm]);
    const attnMask = Tensor.from(Uint8Array.from({ length: N * N }, (_, i) => (i % 7 === 3 ? 1 : 0)), [N, N]);
    const run = (device: Device) => {
      const m = new ViTDecoder({ ...config, device });
      // eps 1e-3: the keys' bias gets a gradient that is 0 in exact arithmetic (softmax ignores a
      // shift shared by all keys), float noise of ~1e-9 on either device; Adam's first step is
      // ≈ lr·g/(|g| + eps), which with a small eps turns that noise into ±lr updates whose signs differ.
      const opt = new AdamW(m.parameters(), { lr: 1e-2, eps: 1e-3 });
      const out = m.forward(memory.to(device), { attnMask: attnMask.to(device), memoryKeyPaddingMask: memoryPad.to(device) });
      const { loss, grad } = mse(out, target.to(device), { mask: rowMask.to(device) });
      const dMemory = m.backward(grad, dTokens.to(device));
      const g = grads(m);
      opt.step();
      return { out: out.toArray(), tokens: m.tokens!.toArray(), loss, dMemory: dMemory.toArray(), grads: g, params: params(m) };
    };
    const ref = run('cpu'), got = run('cuda');
    close('ViTDecoder output', got.out, ref.out);
    close('ViTDecoder tokens', got.tokens, ref.tokens);
    close('ViTDecoder loss', [got.loss], [ref.loss]);
    close('ViTDecoder dMemory', got.dMemory, ref.dMemory);
    closeAll('ViTDecoder grad', got.grads, ref.grads);
    closeAll('ViTDecoder updated', got.params, ref.params);
  });

  it('checkFinite mode on cuda: a training step matches the CPU; a NaN input or an Inf parameter is named as on the CPU', () => {
    const config = { imgSize: 8, patchSize: 4, inChannels: 1, dModel: 16, numHeads: 2, dFF: 24, depth: 1, numClasses: 3, seed: 4 };
    const images = floats(2 * 64, 6, [2, 1, 8, 8]), labels = ints([0, 2], [2]);
    const step = (device: Device) => {
      const m = new ViTClassifier({ ...config, device }), opt = new SGD(m.parameters(), { lr: 0.1 });
      const loss = trainStep(m, opt, images.to(device), labels.to(device));
      return { loss, params: params(m) };
    };
    setCheckFinite(true);
    try {
      const ref = step('cpu'), got = step('cuda');
      close('checkFinite loss', [got.loss], [ref.loss]);
      closeAll('checkFinite updated', got.params, ref.params);
      const bad = images.toArray();
      bad[77] = NaN;
      const nanInput = Tensor.from(bad, [2, 1, 8, 8]);
      for (const device of ['cpu', 'cuda'] as const) {
        const m = new ViTClassifier({ ...config, device });
        const e = failure(() => m.forward(nanInput.to(device)));
        expect(e?.code, device).toBe('ERR_NF_NOT_FINITE');
        expect(e?.message).toBe('Expected finite values for argument 1 (input of ViTClassifier.forward) but received ' +
          'Tensor float32 [2, 1, 8, 8] holding NaN at flat index 77');
        const w = m.stateDict()['head.weight'] as Tensor<'float32'>, values = w.toArray();
        values[5] = -Infinity;
        w.copyFrom(values);
        expect(failure(() => m.forward(images.to(device)))?.message, device).toMatch(/^Expected finite values for parameter ViTClassifier\.head\.weight .* holding -Infinity at flat index 5$/);
      }
    } finally {
      setCheckFinite(false);
    }
  });

  it('the masked-autoencoder example (examples/mae.ts) trains two steps on cuda as on the CPU', async () => {
    const model = { ...MAE_MODEL, dModel: 16, numHeads: 2, dFF: 24, encoderDepth: 1, decoderDepth: 1 };
    const run = async (device: Device) => {
      const steps: { loss: number; params: Record<string, Float32Array> }[] = [];
      const out = fs.mkdtempSync(path.join(os.tmpdir(), `nf-mae-${device}-`));
      const r = await runMae({ epochs: 1, batchSize: 6, lr: 2e-3, trainSize: 12, testSize: 4, seed: 0, out, model, device, maxSteps: 2,
        log: () => undefined, onStep: (_step, loss, enc, dec) => steps.push({ loss, params: { ...params(enc), ...Object.fromEntries(
          Object.entries(params(dec)).map(([n, v]) => [`decoder.${n}`, v])) } }) });
      return { r, steps };
    };
    const ref = await run('cpu'), got = await run('cuda');
    expect(got.steps.length).toBe(2);
    got.steps.forEach((s, i) => {
      close(`MAE loss step ${i + 1}`, [s.loss], [ref.steps[i].loss]);
      // 1e-3 for the parameters: the example's AdamW has eps 1e-8, and the keys' bias gradients are
      // 0 in exact arithmetic (float noise on either device), which Adam turns into ±lr updates
      // (see the ViTDecoder test); every other parameter lands within 1e-5.
      closeAll(`MAE updated step ${i + 1}`, s.params, ref.steps[i].params, 1e-3);
    });
    close('MAE testMse', [got.r.testMse], [ref.r.testMse]);
    expect(fs.existsSync(got.r.picture)).toBe(true);
  }, 300_000);

  it('Encoder and Decoder on their own: forward, backward (dMemory), padding masks', () => {
    const cfg = { vocabSize: 11, maxLen: 6, dModel: 16, numHeads: 2, dFF: 24, depth: 2, seed: 4 };
    const tokens = ints([1, 4, 9, 3, 0, 2, 10, 5, 7, 6], [2, 5]), tgt = ints([1, 2, 3, 4, 5, 6, 7, 8], [2, 4]);
    const pad = Tensor.from(Uint8Array.from([0, 0, 0, 0, 1, 0, 0, 0, 0, 0]), [2, 5]);
    const dy = floats(2 * 5 * 16, 7, [2, 5, 16]);
    const run = (device: Device) => {
      const enc = new Encoder({ ...cfg, normFirst: true, positional: 'learned', device });
      const memory = enc.forward(tokens.to(device), { keyPaddingMask: pad.to(device) });
      enc.backward(dy.to(device));
      const dec = new Decoder({ ...cfg, scaleEmbedding: true, device });
      const logits = dec.forward(tgt.to(device), memory, { memoryKeyPaddingMask: pad.to(device) });
      const { loss, grad } = crossEntropy(logits, ints([2, 3, 4, 5, 6, 7, 8, 9], [2, 4]).to(device));
      const dMemory = dec.backward(grad);
      return { memory: memory.toArray(), logits: logits.toArray(), loss, dMemory: dMemory.toArray(), encGrads: grads(enc), decGrads: grads(dec) };
    };
    const ref = run('cpu'), got = run('cuda');
    close('Encoder output', got.memory, ref.memory);
    closeAll('Encoder grad', got.encGrads, ref.encGrads);
    close('Decoder logits', got.logits, ref.logits);
    close('Decoder loss', [got.loss], [ref.loss]);
    close('Decoder dMemory', got.dMemory, ref.dMemory);
    closeAll('Decoder grad', got.decGrads, ref.decGrads);
  });

  it.each([
    { name: 'post-LN, sinusoidal, dropout', extra: { dropout: 0.1 } },
    { name: 'pre-LN, learned positions', extra: { normFirst: true, positional: 'learned' as const, activation: 'gelu' as const } },
  ])('Transformer ($name): SGD with momentum and clipping, then AdamW through trainStep, then generate', ({ extra }) => {
    const cfg = { srcVocab: 11, tgtVocab: 13, maxLen: 7, dModel: 16, numHeads: 2, dFF: 24, depth: 2, seed: 3, ...extra };
    const src = ints([3, 4, 5, 0, 0, 6, 7, 8, 9, 10], [2, 5]), tgtIn = ints([1, 4, 5, 6, 1, 7, 8, 0], [2, 4]);
    const tgtOut = ints([4, 5, 6, 2, 7, 8, 2, 0], [2, 4]);
    const run = (device: Device) => {
      const m = new Transformer({ ...cfg, device });
      const s = src.to(device), ti = tgtIn.to(device), to = tgtOut.to(device);
      const logits = m.forward(s, ti);
      const { loss, grad } = crossEntropy(logits, to, { ignoreIndex: 0 });
      m.backward(grad);
      const g = grads(m);
      const norm = clipGradNorm(m.parameters(), 0.5);
      const clipped = grads(m);
      new SGD(m.parameters(), { lr: 0.1, momentum: 0.9, weightDecay: 0.01 }).step();
      const afterSgd = params(m);
      const loss2 = trainStep(m, new AdamW(m.parameters(), { lr: 1e-2, eps: 1e-5 }), [s, ti], to, { maxGradNorm: 1 });
      const afterAdam = params(m);
      const cached = m.generate(s, { maxLen: 7 }), uncached = m.generate(s, { maxLen: 7, useCache: false });
      expect(cached.device).toBe(device);
      return { logits: logits.toArray(), loss, g, norm, clipped, afterSgd, loss2, afterAdam, cached: Array.from(cached.toArray()),
        uncached: Array.from(uncached.toArray()) };
    };
    const ref = run('cpu'), got = run('cuda');
    close('Transformer logits', got.logits, ref.logits);
    close('Transformer loss', [got.loss], [ref.loss]);
    closeAll('Transformer grad', got.g, ref.g);
    close('Transformer grad-norm', [got.norm], [ref.norm]);
    closeAll('Transformer clipped', got.clipped, ref.clipped);
    closeAll('Transformer SGD', got.afterSgd, ref.afterSgd);
    close('Transformer trainStep loss', [got.loss2], [ref.loss2]);
    closeAll('Transformer AdamW', got.afterAdam, ref.afterAdam);
    expect(got.cached).toEqual(ref.cached);
    expect(got.uncached).toEqual(ref.uncached);
    expect(got.cached).toEqual(got.uncached);
  }, 300_000);

  it('one decoding step with the key/value caches gives the logits of the full forward at that position', () => {
    const cfg = { vocabSize: 9, maxLen: 6, dModel: 16, numHeads: 2, dFF: 24, depth: 2, seed: 8 };
    const memory = floats(2 * 4 * 16, 5, [2, 4, 16]), tokens = [[1, 3], [5, 2], [7, 7]];
    const run = (device: Device) => {
      const dec = new Decoder({ ...cfg, device }).eval();
      const mem = memory.to(device);
      const states = dec.runOps('decode', dec.startDecoding(mem, 4));
      const steps = tokens.map((t, i) => dec.runOps('decode', dec.decodeStep(Int32Array.from(t), i, states)).toArray());
      const prefix = Tensor.from(Int32Array.from([1, 5, 7, 3, 2, 7]), [2, 3]).to(device);
      return { steps, full: dec.forward(prefix, mem).toArray() };
    };
    const ref = run('cpu'), got = run('cuda');
    got.steps.forEach((s, i) => close(`decodeStep logits ${i}`, s, ref.steps[i]));
    close('decodeStep full', got.full, ref.full);
    // Position 2 of the full forward on cuda equals the third cached step on cuda.
    const V = 9, row = (b: number) => got.full.subarray((b * 3 + 2) * V, (b * 3 + 3) * V);
    close('decodeStep vs forward', [...row(0), ...row(1)], got.steps[2]);
  });

  it('saveModel of a CUDA model writes the CPU model\'s bytes; loadModel + to(cuda) restores it', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-cuda-save-'));
    const config = { imgSize: 8, patchSize: 4, inChannels: 1, dModel: 16, numHeads: 2, dFF: 24, depth: 1, seed: 2 };
    const cpu = new ViTEncoder(config), gpu = new ViTEncoder({ ...config, device: 'cuda' });
    saveModel(path.join(dir, 'cpu.safetensors'), cpu);
    saveModel(path.join(dir, 'cuda.safetensors'), gpu);
    expect(fs.readFileSync(path.join(dir, 'cuda.safetensors')).equals(fs.readFileSync(path.join(dir, 'cpu.safetensors')))).toBe(true);
    const back = loadModel(path.join(dir, 'cuda.safetensors'), ViTEncoder).to('cuda');
    closeAll('saveModel round-trip', params(back), params(cpu));
    for (const m of [cpu, gpu, back]) m.dispose();
  });

  it('the caching allocator reuses last step\'s blocks: a steady training loop allocates nothing fresh', () => {
    const vit = { imgSize: 8, patchSize: 4, inChannels: 3, dModel: 16, numHeads: 2, dFF: 24, depth: 2, numClasses: 4, seed: 1, device: 'cuda' as const };
    const model = new ViTClassifier(vit), opt = new AdamW(model.parameters());
    const x = floats(3 * 3 * 64, 4, [3, 3, 8, 8]).to('cuda'), y = ints([0, 3, 1], [3]).to('cuda');
    const before = cudaMemoryStats();
    const step = () => { // (eager steps: a CUDA graph's capture takes its pool once, test/cuda_graphs.test.ts)
      trainStep(model, opt, x, y, { cudaGraphs: false });
      return cudaMemoryStats();
    };
    const first = step(), second = step();
    const rest = Array.from({ length: 3 }, step).at(-1)!;
    const fresh = (a: typeof before, b: typeof before) => b.fresh - a.fresh;
    const reused = (a: typeof before, b: typeof before) => b.reused - a.reused;
    console.log(`CUDA caching allocator, ViTClassifier training steps on the emulator: step 1 ${fresh(before, first)} fresh / ${reused(before, first)} ` +
      `reused blocks; step 2 ${fresh(first, second)} fresh / ${reused(first, second)} reused; steps 3-5 ${fresh(second, rest)} fresh / ` +
      `${reused(second, rest)} reused; live ${rest.liveBytes} B (peak ${rest.peakLiveBytes} B), cached ${rest.cachedBytes} B`);
    expect(reused(first, second)).toBeGreaterThan(0);
    expect(fresh(second, rest)).toBe(0); // from the third step on, every block comes from the cache
    expect(reused(second, rest)).toBeGreaterThanOrEqual(3 * reused(first, second));
    expect(rest.liveBytes).toBeLessThanOrEqual(rest.peakLiveBytes);
    model.dispose();
    opt.dispose();
    expect(cudaMemoryStats().cachedBytes).toBeGreaterThan(0);
    cudaEmptyCache();
    const empty = cudaMemoryStats();
    expect(empty.cachedBytes).toBe(0);
    expect(empty.released).toBeGreaterThan(rest.released);
    // A zeroed buffer is zero even when its block was last used by something else.
    const t = Tensor.from(Float32Array.from([1, 2, 3, 4]), [4]).to('cuda');
    t.dispose();
    expect(Array.from(Tensor.zeros([4], 'float32', 'cuda').toArray())).toEqual([0, 0, 0, 0]);
  });

  it('...Async ops settle when the stream is done, with the event loop free meanwhile', async () => {
    // One long op: the emulator takes tens to hundreds of milliseconds for this GEMM, on its stream
    // thread; timers keep firing on the main thread until the Promise settles.
    const n = 320, a = floats(n * n, 9, [n, n], 0.05).to('cuda'), out = Tensor.empty([n, n], 'float32', 'cuda');
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const started = performance.now();
    await cuda().linearForwardAsync!({ rows: n, inFeatures: n, outFeatures: n, y: out.storage as never, x: a.storage as never,
      W: a.storage as never, b: null });
    const ms = performance.now() - started;
    clearInterval(timer);
    console.log(`linearForwardAsync ${n}x${n}x${n} on the emulator: ${ms.toFixed(0)} ms, ${ticks} timer ticks meanwhile`);
    expect(ms).toBeGreaterThan(10);
    expect(ticks).toBeGreaterThan(Math.floor(ms / 25));
    const sync = Tensor.empty([n, n], 'float32', 'cuda');
    cuda().linearForward!({ rows: n, inFeatures: n, outFeatures: n, y: sync.storage as never, x: a.storage as never, W: a.storage as never, b: null });
    expect(out.toArray()).toEqual(sync.toArray());
    // A module's forwardAsync on cuda gives what forward gives; synchronizeAsync settles; bad
    // arguments reject the Promise instead of throwing.
    const model = new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 3, dModel: 16, numHeads: 2, dFF: 24, depth: 1, numClasses: 4, seed: 6, device: 'cuda' });
    const x = floats(4 * 3 * 64, 9, [4, 3, 8, 8]).to('cuda');
    expect((await model.forwardAsync(x)).toArray()).toEqual(model.forward(x).toArray());
    await cuda().synchronizeAsync();
    const bad = cuda().addAsync!({ n: 3, out: x.storage as never, a: x.storage as never, b: x.storage as never });
    await expect(bad).rejects.toMatchObject({ code: 'ERR_NF_INVALID_ARG' });
    model.dispose();
  });
});
