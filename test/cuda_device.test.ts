/**
 * device 'cuda' end to end on the SIMT emulator: builds the CUDA addon over the emulator (the build
 * step shared with test/cuda_emulator.test.ts), selects it with NF_CUDA_BACKEND=emulator, and checks
 * Tensor.to round trips, the error for tensors on two devices in one op, and ONE ViTClassifier
 * training step (forward, cross-entropy, backward, AdamW, then a trainStep) on 'cuda' against the
 * same step on 'cpu': loss, logits, every parameter gradient and every updated parameter within a
 * relative error of 1e-4 (the largest is printed). Also, without any build: device 'cuda' on a
 * build without CUDA throws ERR_NF_NO_CUDA. The emulator runs kernels thread by thread on the CPU,
 * so the shapes are tiny and awkward (12x12 images, 4x4 patches, width 48, 2 heads of 24).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import {
  AdamW, Linear, Module, native, NodeformerError, SGD, supportedOps, supports, Tensor, Transformer,
  ViTClassifier, ViTDecoder,
} from '../lib/index';
import { main } from '../lib/cli/program';
import { cuda, declaredOps } from '../lib/core/device';
import { HOST_ONLY_OPS, OP_NAMES } from '../lib/native/ops.generated';
import type { OpName, Program } from '../lib/core/program';
import { failure, relErr } from './helpers';
import { buildEmulated, emulatorSkipReason, root } from './support/cuda_emu_build';
import { vitTrainingStep } from './support/vit_step';

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the device 'cuda' emulator tests: ${reason}`);


describe.skipIf(reason !== null)("device 'cuda' on the SIMT emulator", () => {
  const errors: [string, number][] = [];
  const close = (label: string, got: ArrayLike<number>, want: ArrayLike<number>) => {
    const e = relErr(got, want);
    errors.push([label, e]);
    expect(e, label).toBeLessThan(1e-4);
  };

  beforeAll(async () => {
    const build = await buildEmulated();
    expect(build.ok, build.out).toBe(true);
    expect(build.out).not.toMatch(/warning:/);
    process.env.NF_CUDA_BACKEND = 'emulator';
    expect(cuda().backendInfo()).toMatchObject({ emulated: true, devices: 1, gemm: { backend: expect.stringMatching(/^(cublaslt|kernel)$/) } });
  }, 900_000);

  afterAll(() => {
    // The largest relative error per kind of output (loss/logits, gradients, parameters after
    // AdamW, after the second step through trainStep).
    const kinds = new Map<string, [string, number]>();
    for (const [label, e] of errors) {
      const kind = label.split(' ')[0];
      if (!kinds.has(kind) || e > kinds.get(kind)![1]) kinds.set(kind, [label, e]);
    }
    for (const [kind, [label, e]] of kinds) console.log(`cuda vs cpu, largest relative error (${kind}): ${e.toExponential(2)} (${label})`);
  });

  it("Tensor.to('cuda') / to('cpu') round trips every dtype; device memory is explicit", () => {
    const before = cuda().deviceAllocatedBytes();
    const values = { float32: Float32Array.from([1.5, -2, 3.25, 0, 7, -0.125]), int32: Int32Array.from([4, -5, 6, 7, 8, 9]),
      bool: Uint8Array.from([1, 0, 0, 1, 1, 0]) };
    for (const v of Object.values(values)) {
      const host = Tensor.from(v, [2, 3]);
      const dev = host.to('cuda');
      expect(dev.device).toBe('cuda');
      expect(dev.dtype).toBe(host.dtype);
      expect(dev.to('cuda')).toBe(dev);
      expect(() => dev.data).toThrowError(expect.objectContaining({ code: 'ERR_NF_DEVICE' }));
      expect(dev.toArray()).toEqual(v);
      const back = dev.reshape([3, 2]).to('cpu');
      expect(back.device).toBe('cpu');
      expect(back.shape).toEqual([3, 2]);
      expect(back.data).toEqual(v);
      expect(String(dev)).toContain("device='cuda'");
      dev.fillZero();
      expect(Array.from(dev.toArray())).toEqual([0, 0, 0, 0, 0, 0]);
      dev.dispose();
      expect(dev.disposed).toBe(true);
      expect(() => dev.toArray()).toThrowError(expect.objectContaining({ code: 'ERR_NF_DISPOSED' }));
    }
    expect(cuda().deviceAllocatedBytes()).toBeLessThanOrEqual(before + 3 * 24); // the reshaped copies await GC
    expect(Tensor.zeros([2, 2], 'float32', 'cuda').toArray()).toEqual(new Float32Array(4));
  });

  it('an op with tensors on both devices throws ERR_NF_DEVICE naming them; async ops run too', async () => {
    const lin = new Linear({ inFeatures: 4, outFeatures: 3 }).to('cuda');
    expect(lin.weight.device).toBe('cuda');
    const x = Tensor.from(new Float32Array(8), [2, 4]);
    const err = (() => { try { lin.forward(x); } catch (e) { return e; } })() as NodeformerError;
    expect(err).toBeInstanceOf(NodeformerError);
    expect(err.code).toBe('ERR_NF_DEVICE');
    expect(err.message).toMatch(/linearForward: .*W, b are on cuda and y, x are on cpu/);
    const y = lin.forward(x.to('cuda'));
    expect(y.device).toBe('cuda');
    expect((await lin.forwardAsync(x.to('cuda'))).toArray()).toEqual(y.toArray());
    lin.to('cpu');
    expect(relErr(lin.forward(x).toArray(), y.toArray())).toBeLessThan(1e-6);
  });

  it('one ViTClassifier training step (forward, cross-entropy, backward, AdamW) matches the CPU', () => {
    const run = (device: 'cpu' | 'cuda') => vitTrainingStep(device);
    const ref = run('cpu');
    const got = run('cuda');
    expect(new Set(got.devices)).toEqual(new Set(['cuda']));
    close('loss', [got.loss], [ref.loss]);
    close('logits', got.logits, ref.logits);
    expect(Object.keys(got.grads).sort()).toEqual(Object.keys(ref.grads).sort());
    for (const name of Object.keys(ref.grads)) {
      close(`grad ${name}`, got.grads[name], ref.grads[name]);
      close(`updated ${name}`, got.params[name], ref.params[name]);
      close(`step 2 ${name}`, got.params2[name], ref.params2[name]);
    }
    close('step 2 loss', [got.loss2], [ref.loss2]);
  }, 120_000);

  it("has a CUDA kernel for every op of the CPU addon but the host-only ones, under the CPU addon's schema", () => {
    type Entry = { name: string; hostOnly: boolean; reference?: boolean; bf16: boolean };
    const cpuOps = JSON.parse(native.opSchema()) as Entry[], cudaOps = JSON.parse(cuda().opSchema()) as Entry[];
    expect(cpuOps.filter((o) => o.hostOnly).map((o) => o.name)).toEqual([...HOST_ONLY_OPS]);
    expect(cudaOps.map((o) => o.name)).toEqual(cpuOps.filter((o) => !o.hostOnly).map((o) => o.name));
    // The same entries (fields, docs), less the CPU addon's note of a float64 twin and each addon's own
    // note of a kernel for bfloat16 activations (CUDA: the layers' ops; the CPU: fewer, none CUDA lacks).
    expect(cudaOps.map(({ bf16: _, ...o }) => o)).toEqual(cpuOps.filter((o) => !o.hostOnly).map(({ reference: _, bf16: __, ...o }) => o));
    const bf16 = (ops: Entry[]) => ops.filter((o) => o.bf16).map((o) => o.name);
    expect(bf16(cudaOps)).toEqual(expect.arrayContaining(['layernormForward', 'attentionForward', 'feedforwardForward', 'adamwMultiStep']));
    expect(bf16(cudaOps)).toEqual(expect.arrayContaining(bf16(cpuOps)));
    for (const op of HOST_ONLY_OPS) expect(supports(op, 'cuda'), op).toBe(false);
  });

  it("supports(op, 'cuda') is the CUDA addon's own list; Module.to and the optimizers check it, naming what is missing", () => {
    const names = (JSON.parse(cuda().opSchema()) as { name: string }[]).map((o) => o.name);
    expect([...supportedOps('cuda')].sort()).toEqual([...names].sort());
    for (const op of ['layernormForward', 'attentionBackward', 'gemm', 'copyRows']) expect(supports(op, 'cuda'), op).toBe(true);
    expect(supports('fmaPeak', 'cuda')).toBe(false); // a CPU measurement
    const missing = new Set<string>(OP_NAMES.filter((op) => !supports(op, 'cuda')));

    // A module that declares an op without a CUDA kernel fails before anything moves; host-only ops
    // (fmaPeak, packWeights: CPU work by nature) are never asked of a device.
    class Probe extends Module {
      static override readonly ops = ['fmaPeak', 'noSuchKernel' as OpName, 'layernormForward'] as const;
      readonly w = this.addParameter('w', [2], new Float32Array(2));
      *forwardProgram(): Program<void> {}
      *backwardProgram(): Program<void> {}
    }
    const probe = new Probe();
    const err = failure(() => probe.to('cuda'));
    expect(err?.code).toBe('ERR_NF_DEVICE');
    expect(err?.message).toBe('Probe cannot run on cuda: the CUDA backend has no kernel for noSuchKernel (an op it would run); keep it on cpu');
    expect(probe.w.device).toBe('cpu');

    // The models: to('cuda') succeeds exactly when every op they declare, host-only ones aside, has a CUDA kernel.
    const hostOnly = new Set<string>(HOST_ONLY_OPS);
    const small = { dModel: 16, numHeads: 2, dFF: 24, depth: 1 };
    for (const model of [new ViTClassifier({ imgSize: 8, patchSize: 4, numClasses: 3, ...small }),
      new ViTDecoder({ imgSize: 8, patchSize: 4, ...small }), new Transformer({ srcVocab: 5, tgtVocab: 5, maxLen: 6, ...small })]) {
      const need = [...declaredOps(model.modules())].filter((op) => missing.has(op) && !hostOnly.has(op)).sort();
      const e = failure(() => model.to('cuda'));
      if (need.length === 0) {
        expect(e, model.constructor.name).toBeNull();
        model.to('cpu');
      } else {
        expect(e?.code, model.constructor.name).toBe('ERR_NF_DEVICE');
        expect(e?.message).toContain(`${model.constructor.name} cannot run on cuda: the CUDA backend has no kernel for ${need.join(', ')}`);
        expect(new Set(model.parameters().map((p) => p.device))).toEqual(new Set(['cpu']));
      }
    }

    // The optimizers, over parameters on cuda.
    const params = new Linear({ inFeatures: 3, outFeatures: 2 }).to('cuda').parameters();
    expect(failure(() => new AdamW(params))).toBeNull();
    const sgd = failure(() => new SGD(params, { momentum: 0.9 }));
    if (missing.has('sgdStep')) expect(sgd?.message).toBe('SGD cannot run on cuda: the CUDA backend has no kernel for sgdStep (an op it would run); keep it on cpu');
    else expect(sgd).toBeNull();
  });

  it('the command line trains, evaluates and predicts with --device cuda', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-cli-cuda-'));
    const lines: string[] = [];
    const flags = ['--device', 'cuda', '--test-size', '20'];
    const status = await main(['train', ...flags, '--epochs', '1', '--train-size', '40', '--batch-size', '20', '--out', out], (l) => lines.push(l));
    expect(status, lines.join('\n')).toBe(0);
    expect(lines[0]).toContain('CUDA');
    expect(lines.at(-1)).toMatch(/Test accuracy [\d.]+% \(\d+\/20\) after 1 epoch/);
    const model = path.join(out, 'model.safetensors');
    expect(await main(['eval', '--model', model, ...flags], (l) => lines.push(l))).toBe(0);
    expect(await main(['predict', path.join(out, 'samples', 'digit-7.png'), '--model', model, '--device', 'cuda'], (l) => lines.push(l))).toBe(0);
    expect(lines.at(-1)).toMatch(/digit-7\.png: \d \([\d.]+%\)$/);
  }, 120_000);
});

const gpuAddon = path.join(root, 'build', 'cuda', 'nodeformer_cuda.node');

describe('without a usable CUDA backend', () => {
  it("device 'cuda' throws ERR_NF_NO_CUDA saying so", async () => {
    const saved = process.env.NF_CUDA_BACKEND;
    process.env.NF_CUDA_BACKEND = 'none';
    try {
      vi.resetModules();
      const lib = await import('../lib/index');
      for (const attempt of [() => lib.Tensor.from(new Float32Array(2), [2]).to('cuda'),
        () => lib.Tensor.zeros([2], 'float32', 'cuda'), () => new lib.Linear({ inFeatures: 2, outFeatures: 2 }).to('cuda')]) {
        const err = (() => { try { attempt(); } catch (e) { return e; } })() as NodeformerError;
        expect(err?.code).toBe('ERR_NF_NO_CUDA');
        expect(err.message).toContain('built without CUDA');
      }
      expect(() => lib.Tensor.zeros([2], 'float32', 'gpu' as never)).toThrowError(/Expected 'cpu' or 'cuda' for device/);
    } finally {
      if (saved === undefined) delete process.env.NF_CUDA_BACKEND;
      else process.env.NF_CUDA_BACKEND = saved;
      vi.resetModules();
    }
  });

  // The real backend (npm run build:cuda) where it was built: on a machine without a usable GPU the
  // failing CUDA runtime call surfaces as ERR_NF_CUDA naming the call and its file:line.
  it.skipIf(!fs.existsSync(gpuAddon))('the nvcc-built addon reports CUDA runtime errors as ERR_NF_CUDA with file:line', async () => {
    const saved = process.env.NF_CUDA_BACKEND;
    process.env.NF_CUDA_BACKEND = 'gpu';
    try {
      vi.resetModules();
      const lib = await import('../lib/index');
      let t: Tensor | null = null;
      try {
        t = lib.Tensor.zeros([2], 'float32', 'cuda');
      } catch (e) {
        expect((e as NodeformerError).code).toBe('ERR_NF_CUDA');
        expect((e as Error).message).toMatch(/^device_count: cudaError\w+: .*\(cudaGetDeviceCount\(n\) at .*native\/cuda\/device\.cu:\d+\)$/);
        console.log(`the GPU build here: ${(e as Error).message}`);
      }
      if (t) expect(t.toArray()).toEqual(new Float32Array(2)); // a machine with a GPU
    } finally {
      if (saved === undefined) delete process.env.NF_CUDA_BACKEND;
      else process.env.NF_CUDA_BACKEND = saved;
      vi.resetModules();
    }
  });
});
