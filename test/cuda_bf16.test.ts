/**
 * Precision 'bf16' with bfloat16 activations (the design: native/cuda/bf16.cuh): the Tensor dtype 'bfloat16' (host
 * bits, float32 values, cast() rounding to nearest even) on the CPU; on the SIMT emulator, the same
 * cast on the device, the bf16 buffers' checks in the ops, a ViTClassifier forward and backward
 * through the own GEMM kernel against the CPU at fp32 (tolerance 3e-2, the precision's), and every
 * other model (Transformer with generation, ViTDecoder, BertModel, ViT variants) likewise; and, in a
 * child process with the cuBLASLt stand-in (test/support/bf16_child.ts), 40 AdamW steps at bf16 on
 * 'cuda' tracking the fp32 CPU loss curve within 2%, the bytes a training forward keeps at bf16
 * against fp32, what stays float32 (parameters, gradients, optimizer state, stateDict), and that the bf16
 * copies the products read (weights, biases) are current after AdamW steps. The
 * kernels' own parity with the float64 references is the C++ suite's (native/cuda/tests/bf16_test.cpp).
 * No GPU has run any of it: the 300-step seed-cifar check is in bench/gpu/bf16_check.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';

import {
  AdamW, BertModel, crossEntropy, Linear, mse, native, Tensor, Transformer, trainStep, ViTClassifier, ViTDecoder,
} from '../lib/index';
import { cuda } from '../lib/core/device';
import { failure, randn32, relErr, rng } from './helpers';
import { buildEmulated, cublasltStandIn, emulatorSkipReason, runEmulatedChild } from './support/cuda_emu_build';

/** bfloat16 bits → the float they stand for. */
const value = (bits: number) => new Float32Array(new Uint32Array([bits << 16]).buffer)[0];

describe("the 'bfloat16' dtype on the CPU", () => {
  it('casts float32 to bfloat16 rounding to nearest even (ties to even, NaN and ±inf kept) and back exactly', () => {
    const x = Float32Array.from([1, 1 + 1 / 256, 1 + 3 / 256, -2.5, 3.1415927, 1e-40, Infinity, -Infinity, NaN, 65504.5]);
    const b = Tensor.from(x, [10]).cast('bfloat16');
    expect(b.dtype).toBe('bfloat16');
    const bits = b.data;
    expect(bits).toBeInstanceOf(Uint16Array);
    expect(value(bits[1])).toBe(1); // a tie goes to the even mantissa
    expect(value(bits[2])).toBe(1 + 4 / 256);
    expect(value(bits[3])).toBe(-2.5);
    expect(value(bits[4])).toBe(3.140625);
    expect([value(bits[6]), value(bits[7])]).toEqual([Infinity, -Infinity]);
    expect(Number.isNaN(value(bits[8]))).toBe(true);
    const back = b.cast('float32');
    expect(back.dtype).toBe('float32');
    expect([...back.data]).toEqual([...b.toArray()]);
    expect(b.hostValues()).toBeInstanceOf(Float32Array);
    for (let i = 0; i < x.length; i++) if (Number.isFinite(x[i]) && Math.abs(x[i]) > 1e-37) expect(Math.abs(back.data[i] - x[i])).toBeLessThanOrEqual(Math.abs(x[i]) / 256);
    expect(b.cast('bfloat16')).toBe(b);
  });

  it('bfloat16 tensors hold 2 bytes a value; from(Uint16Array) takes bits; other casts are ERR_NF_INVALID_ARG', () => {
    const z = Tensor.zeros([3, 5], 'bfloat16');
    expect(z.data.byteLength).toBe(30);
    const t = Tensor.from(Uint16Array.from([0x3f80, 0xc000]), [2]);
    expect(t.dtype).toBe('bfloat16');
    expect([...t.toArray()]).toEqual([1, -2]);
    expect(failure(() => Tensor.from(Int32Array.from([1]), [1]).cast('bfloat16'))?.code).toBe('ERR_NF_INVALID_ARG');
    expect(failure(() => Tensor.zeros([2], 'float16' as never))?.code).toBe('ERR_NF_INVALID_ARG');
  });

  it('a CPU op rejects bfloat16 storage naming the field; a CPU layer computes it as float32', () => {
    const e = failure(() => native.add({ n: 2, out: new Float32Array(2), a: new Float32Array(2), b: new Uint16Array(2) as never }));
    expect(e?.code).toBe('ERR_NF_INVALID_ARG');
    expect(e?.message).toMatch(/\bb\b/);
    const lin = new Linear({ inFeatures: 4, outFeatures: 3 });
    const x = Tensor.from(Float32Array.from([1, 2, 3, 4]), [1, 4]);
    expect([...lin.forward(x.cast('bfloat16')).toArray()]).toEqual([...lin.forward(x).toArray()]); // (1..4 are exact in bf16)
  });
});

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the bf16 emulator tests: ${reason}`);
const small = { imgSize: 12, patchSize: 4, inChannels: 3, dModel: 48, numHeads: 2, dFF: 72, depth: 2, dropout: 0, numClasses: 5, seed: 7 };

const ints = (v: number[], shape: number[], device: 'cpu' | 'cuda') => Tensor.from(Int32Array.from(v), shape, device);
const floats = (n: number, seed: number, shape: number[], device: 'cpu' | 'cuda') =>
  Tensor.from(Float32Array.from(randn32(n, rng(seed))), shape, device);
/** Every parameter gradient of `m`, concatenated. */
const grads = (m: { parameters(): { grad: Tensor | null }[] }) => Float32Array.from(m.parameters().flatMap((p) => [...p.grad!.toArray()]));

type Memory = { bytes: number; logits: string; params: string[]; grads: string[]; stateDict: string[]; optimizerState: string };
type Report = {
  curve: { fp32: number[]; bf16: number[] }; calls: Record<string, number>; memory: { fp32: Memory; bf16: Memory }; copiesFresh: boolean;
};

describe.skipIf(reason !== null)("precision 'bf16' on CUDA (SIMT emulator)", () => {
  beforeAll(async () => {
    const build = await buildEmulated();
    expect(build.ok, build.out).toBe(true);
    process.env.NF_CUDA_BACKEND = 'emulator';
  }, 900_000);

  it('cast on the device rounds as on the CPU; a float32 field refuses a bfloat16 buffer (and back) naming the field', () => {
    const x = Float32Array.from(randn32(1003, rng(3), 3));
    const host = Tensor.from(x, [1003]).cast('bfloat16');
    const dev = Tensor.from(x, [1003], 'cuda').cast('bfloat16');
    expect(dev.device).toBe('cuda');
    expect([...dev.to('cpu').data]).toEqual([...host.data]);
    expect([...dev.cast('float32').toArray()]).toEqual([...host.toArray()]);
    const a = Tensor.zeros([4], 'float32', 'cuda'), b = Tensor.zeros([4], 'bfloat16', 'cuda');
    const e = failure(() => cuda().sumSquares!({ n: 4, x: b.storage as never, out: Tensor.zeros([1], 'float32', 'cuda').storage }));
    expect(e?.code).toBe('ERR_NF_INVALID_ARG');
    expect(e?.message).toMatch(/float32 buffer of 4 elements for x but received a bfloat16 device buffer of 4 elements/);
    const f = failure(() => cuda().accumulate!({ n: 4, y: b.storage as never, x: a.storage }));
    expect(f?.message).toMatch(/bfloat16 buffer of 4 elements for x/);
  });

  it('a ViTClassifier at bf16 keeps bfloat16 activations and matches the CPU at fp32 within 3e-2 (own GEMM kernel)', () => {
    const images = Tensor.from(Float32Array.from(randn32(3 * 3 * 12 * 12, rng(11))), [3, 3, 12, 12]);
    const targets = Tensor.from(Int32Array.from([1, 4, 0]), [3]);
    const run = (device: 'cpu' | 'cuda', precision: 'fp32' | 'bf16') => {
      const m = new ViTClassifier({ ...small, device, precision });
      const logits = m.forward(images.to(device));
      const { loss, grad } = crossEntropy(logits, targets.to(device));
      const dimages = m.backward(grad);
      const out = { dtype: logits.dtype, gradDtype: grad.dtype, dimages: dimages.dtype, loss, logits: logits.toArray(),
        grads: Float32Array.from(m.parameters().flatMap((p) => [...p.grad!.toArray()])) };
      m.dispose();
      return out;
    };
    const ref = run('cpu', 'fp32'), got = run('cuda', 'bf16');
    expect([got.dtype, got.gradDtype, got.dimages]).toEqual(['bfloat16', 'bfloat16', 'float32']);
    const errors = { loss: relErr([got.loss], [ref.loss]), logits: relErr(got.logits, ref.logits), grads: relErr(got.grads, ref.grads) };
    console.log(`bf16 (own kernel) vs cpu fp32: ${JSON.stringify(errors)}`);
    for (const e of Object.values(errors)) expect(e).toBeLessThan(3e-2);
  }, 600_000);

  it.each([
    ['Transformer (dropout, clipping, accumulation, generation)', (device: 'cpu' | 'cuda', precision: 'fp32' | 'bf16') => {
      const m = new Transformer({ srcVocab: 11, tgtVocab: 13, maxLen: 7, dModel: 16, numHeads: 2, dFF: 24, depth: 2, seed: 3, dropout: 0.1,
        device, precision });
      const src = ints([3, 4, 5, 0, 0, 6, 7, 8, 9, 10], [2, 5], device), tgtIn = ints([1, 4, 5, 6, 1, 7, 8, 0], [2, 4], device);
      const tgtOut = ints([4, 5, 6, 2, 7, 8, 2, 0], [2, 4], device);
      const { grad } = crossEntropy(m.forward(src, tgtIn), tgtOut, { ignoreIndex: 0 });
      m.backward(grad);
      const g = grads(m);
      trainStep(m, new AdamW(m.parameters()), [src, tgtIn], tgtOut, { maxGradNorm: 1, accumulate: 2 });
      return { values: g, tokens: [...m.generate(src, { maxLen: 7 }).toArray()] };
    }],
    ['ViTDecoder (masked MSE, dTokens)', (device: 'cpu' | 'cuda', precision: 'fp32' | 'bf16') => {
      const m = new ViTDecoder({ imgSize: 8, patchSize: 2, inChannels: 2, dModel: 24, numHeads: 2, dFF: 40, depth: 2, seed: 9, device, precision });
      const out = m.forward(floats(2 * 5 * 24, 1, [2, 5, 24], device));
      m.backward(mse(out, floats(2 * 16 * 8, 2, [2, 16, 8], device)).grad, floats(2 * 16 * 24, 3, [2, 16, 24], device));
      return { values: grads(m) };
    }],
    ['ViTClassifier (avg pool, fc_norm, LayerScale, noEmbedClass, drop path, dropout)', (device: 'cpu' | 'cuda', precision: 'fp32' | 'bf16') => {
      const m = new ViTClassifier({ ...small, imgSize: 8, globalPool: 'avg', noEmbedClass: true, initValues: 0.1, dropPath: 0.2, dropout: 0.1,
        device, precision });
      const { grad } = crossEntropy(m.forward(floats(2 * 3 * 64, 5, [2, 3, 8, 8], device)), ints([0, 2], [2], device));
      m.backward(grad);
      return { values: grads(m) };
    }],
    ['BertModel (pooler, padding mask)', (device: 'cpu' | 'cuda', precision: 'fp32' | 'bf16') => {
      const m = new BertModel({ vocabSize: 20, dModel: 16, numHeads: 2, dFF: 24, depth: 2, maxPositions: 8, seed: 2, device, precision });
      const out = m.forward(ints([1, 4, 5, 6, 2, 7, 8, 9, 3, 0], [2, 5], device),
        { attentionMask: ints([1, 1, 1, 1, 0, 1, 1, 1, 1, 1], [2, 5], device) });
      m.backward(floats(2 * 5 * 16, 4, [2, 5, 16], device), floats(2 * 16, 5, [2, 16], device));
      return { values: Float32Array.from([...out.poolerOutput!.toArray(), ...grads(m)]) };
    }],
  ] as [string, (device: 'cpu' | 'cuda', precision: 'fp32' | 'bf16') => { values: Float32Array; tokens?: number[] }][])(
    '%s at bf16 on cuda matches the CPU at fp32 within 3e-2', (name, run) => {
    const ref = run('cpu', 'fp32'), got = run('cuda', 'bf16');
    const e = relErr(got.values, ref.values);
    console.log(`${name}: bf16 vs cpu fp32 ${e.toExponential(2)}`);
    expect(e).toBeLessThan(3e-2);
    expect(got.tokens).toEqual(ref.tokens);
  }, 600_000);

  it('40 AdamW steps at bf16 track the fp32 loss curve within 2%; a training forward keeps about half the bytes; masters, gradients, state and stateDict stay float32', async () => {
    const { report } = await runEmulatedChild<Report>('bf16_child.ts', { NF_CUBLASLT_PATH: cublasltStandIn, NF_TEST_STEPS: '40' });
    const { fp32, bf16 } = report.curve;
    expect(bf16).toHaveLength(40);
    const worst = Math.max(...fp32.map((l, i) => Math.abs(bf16[i] - l) / l));
    console.log(`loss fp32 ${fp32[0].toFixed(4)} → ${fp32.at(-1)!.toFixed(4)}, bf16 ${bf16[0].toFixed(4)} → ${bf16.at(-1)!.toFixed(4)}; ` +
      `largest relative difference ${worst.toExponential(2)}`);
    expect(fp32.at(-1)!).toBeLessThan(fp32[0] / 10); // it learns
    expect(worst).toBeLessThan(0.02);
    // Every product ran on cuBLASLt (the stand-in) over bf16 operands.
    expect(report.calls.kernel).toBe(0);
    expect(report.calls.bf16).toBe(report.calls.cublaslt);
    const { fp32: m32, bf16: m16 } = report.memory;
    const ratio = m16.bytes / m32.bytes;
    console.log(`bytes a training forward keeps: fp32 ${m32.bytes}, bf16 ${m16.bytes} (ratio ${ratio.toFixed(3)})`);
    expect(ratio).toBeLessThan(0.55); // about half: everything a backward reads is bfloat16 but the statistics (mean, rstd, lse)
    expect(m16).toMatchObject({ logits: 'bfloat16', params: ['float32'], grads: ['float32'], stateDict: ['float32'], optimizerState: 'float32' });
    expect(m32.logits).toBe('float32');
    // AdamW keeps the bf16 copies current (the weights' and the biases' the products' epilogues read): the
    // trained model's eval logits are those of a fresh model loaded from its stateDict, bit for bit.
    expect(report.copiesFresh).toBe(true);
  }, 900_000);
});
