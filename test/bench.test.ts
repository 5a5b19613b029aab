/**
 * The benchmark harness (bench/): its FLOP counts and options, and a smoke run of `--quick` on the
 * tiny ViT and Transformer, end to end through every peer that this machine has (no timing assertions: the
 * machine may be busy). Peers that are missing must be reported as such, not fail the run; peers
 * that ran must have run the same model (logits and first-step loss agree with ours).
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import { OP_FAMILIES, parseOptions, type Options } from '../bench/cli';
import { forwardFlops, trainFlops } from '../bench/flops';
import { opCases, parameterSizes } from '../bench/op_cases';
import { opRows } from '../bench/op_rows';
import { breakdownTable, render, targetTable } from '../bench/report';
import { bestOf, pool, pooled, type Mode, type ModelResult, type PeerName, type Results } from '../bench/results';
import { curveComparisons, patternBatch, windowRelDiffs } from '../bench/loss_curve';
import { MODELS, type ViTArch } from '../bench/specs';
import { targetChecks } from '../bench/targets';
import { buildModel } from '../bench/workloads';

const spec = (id: string) => MODELS.find((m) => m.id === id)!;

describe('bench FLOP counts', () => {
  it('match the published ViT-B/16 figure (17.6 GMACs = 35.1 GFLOP per 224×224 image)', () => {
    const f = forwardFlops(spec('vit-b16-b1'));
    expect(Math.abs(f / 35.1e9 - 1)).toBeLessThan(0.01);
    expect(forwardFlops(spec('vit-b16-b8'))).toBeCloseTo(8 * f, -3);
    expect(trainFlops(spec('seed-cifar'))).toBeCloseTo(3 * forwardFlops(spec('seed-cifar')), -3);
  });

  it('count the Transformer base as ≈ 2·params·tokens plus attention', () => {
    // 48.2M weights in the blocks and the head (embeddings are lookups), 16·64 tokens per side:
    // 2·params·tokens ≈ 99 GFLOP, plus ≈ 2 GFLOP of attention scores and weighted sums.
    const f = forwardFlops(spec('transformer-base'));
    expect(f).toBeGreaterThan(90e9);
    expect(f).toBeLessThan(110e9);
  });
});

describe('bench options', () => {
  it('default to every model but the tiny ones, inference (float32 and int8) and training, every operator family and peer, 2 threads', () => {
    const o = parseOptions([]) as Options;
    expect(o.models).toEqual(['seed-cifar', 'seed-stl10', 'vit-b16-b1', 'vit-b16-b8', 'transformer-base']);
    expect(o).toMatchObject({ modes: ['infer', 'int8', 'train'], ops: ['linear', 'attention', 'feedforward', 'layernorm', 'adamw'],
      peers: ['ort', 'torch'], threads: 2, batch: null, rounds: 1 });
    expect(parseOptions(['--rounds', '3'])).toMatchObject({ rounds: 3 });
    expect(() => parseOptions(['--rounds', '0'])).toThrow(/for --rounds/);
    expect(() => parseOptions(['--peers', 'openblas'])).toThrow(/Expected one of ort, torch for --peers but received openblas/);
  });

  it('--rounds pools the timed runs of every round, ours and each peer variant, and keeps the first round\'s agreement', () => {
    const ok = (samples: number[], maxRssKb: number) => ({ status: 'ok' as const, samples, medianSeconds: samples[0], maxRssKb });
    const round = (ours: number[], ort: number[], torch: [number[], number[]], rss: number): ModelResult => ({
      model: 'm', title: 'm', batch: 1, mode: 'infer', unit: 'img/s', items: 1, flops: 1, ours: ok(ours, rss),
      peers: [{ name: 'onnxruntime-node', variant: 'spin', outcome: ok(ort, rss), agreement: { maxAbsDiff: rss } },
        { name: 'PyTorch', variant: 'a', outcome: ok(torch[0], rss), agreement: null },
        { name: 'PyTorch', variant: 'b', outcome: ok(torch[1], rss), agreement: null }],
    });
    const r = pooled([round([1, 2], [5], [[1], [9]], 10), round([3], [6, 7], [[2], [8]], 30), round([4, 9], [8], [[3], [7]], 20)]);
    expect(r.ours).toMatchObject({ samples: [1, 2, 3, 4, 9], medianSeconds: 3, maxRssKb: 30 });
    expect(r.peers[0]).toMatchObject({ name: 'onnxruntime-node', outcome: { samples: [5, 6, 7, 8], medianSeconds: 6.5 }, agreement: { maxAbsDiff: 10 } });
    expect(r.peers.slice(1).map((p) => [p.variant, p.outcome])).toMatchObject([['a', { samples: [1, 2, 3], medianSeconds: 2 }], ['b', { samples: [9, 8, 7], medianSeconds: 8 }]]);
    expect(bestOf(r.peers, 'PyTorch')?.variant).toBe('a');
    expect(pool([{ status: 'failed', reason: 'x' }, ok([2], 1)])).toMatchObject({ samples: [2] });
    expect(pool([{ status: 'failed', reason: 'x' }])).toMatchObject({ status: 'failed' });
  });

  it('measure ours with its threads sleeping and spinning, pool each way over the rounds, and let the faster stand for ours', () => {
    const ok = (samples: number[]) => ({ status: 'ok' as const, samples, medianSeconds: samples[0], maxRssKb: 1 });
    const round = (sleep: number[], spin: number[]): ModelResult => ({
      model: 'seed-cifar', title: 'm', batch: 64, mode: 'infer', unit: 'img/s', items: 64, flops: 1, ours: ok([Math.min(...sleep, ...spin)]), peers: [],
      oursVariants: [{ variant: 'threads sleep', outcome: ok(sleep) }, { variant: 'threads spin 100 µs', outcome: ok(spin) }],
    });
    const r = pooled([round([3], [2]), round([4], [5]), round([5], [6])]);
    expect(r.oursVariants!.map((v) => v.outcome)).toMatchObject([{ samples: [3, 4, 5], medianSeconds: 4 }, { samples: [2, 5, 6], medianSeconds: 5 }]);
    expect(r.ours).toMatchObject({ samples: [3, 4, 5] });
    expect(render({ date: '', command: '', machine: { cpu: 'Test CPU' }, options: {}, peers: {}, isa: 'avx2', ops: [], peaks: [], models: [r] })).toMatch(/- seed-cifar inference: ours 16\.0 img\/s \(threads sleep\), 12\.8 img\/s \(threads spin 100 µs\)/);
  });

  it('--quick shrinks the run, and explicit options win', () => {
    expect(parseOptions(['--quick'])).toMatchObject({ models: ['seed-cifar'], batch: 16, reps: 2 });
    expect(parseOptions(['--quick', '--models', 'tiny', '--reps', '3'])).toMatchObject({ models: ['tiny'], batch: null, reps: 3 });
  });

  it('reject unknown names and bad numbers with the expected-received message', () => {
    expect(() => parseOptions(['--models', 'resnet'])).toThrow(/Expected one of seed-cifar.* for --models but received resnet/);
    expect(() => parseOptions(['--threads', '0'])).toThrow(/Expected an integer >= 1 for --threads but received 0/);
    expect(parseOptions(['--help'])).toBe('help');
  });
});

describe('bench operator cases', () => {
  it('count every parameter tensor of the models (the AdamW case)', () => {
    for (const id of ['tiny', 'tiny-s2s', 'seed-cifar']) {
      const model = buildModel(spec(id).arch);
      expect([...parameterSizes(spec(id))].sort((a, b) => a - b)).toEqual(model.parameters().map((p) => p.size).sort((a, b) => a - b));
      model.dispose();
    }
  });

  it('cover each model\'s ops: a ViT\'s four Linears and self-attention, the Transformer\'s three attentions and vocabulary head', () => {
    const ops = (id: string) => opCases(spec(id), OP_FAMILIES).map((c) => ('label' in c ? `${c.op} ${c.label}` : c.op));
    expect(ops('seed-cifar')).toEqual(['layernorm', 'attention self', 'feedforward', 'linear qkv', 'linear proj', 'linear fc1', 'linear fc2', 'adamw']);
    expect(ops('transformer-base')).toEqual(['attention encoder self', 'attention decoder causal', 'attention cross', 'layernorm', 'feedforward',
      'linear qkv', 'linear fc1', 'linear fc2', 'linear head', 'adamw']);
    expect(opCases(spec('seed-cifar'), ['linear'])[0]).toEqual({ op: 'linear', label: 'qkv', rows: 64 * 65, inFeatures: 128, outFeatures: 384 });
  });

  it('derive a fused part as the median paired difference of the layer and its Linears, and report a missing side with its reason', () => {
    const c = opCases(spec('seed-cifar'), ['feedforward'])[0];
    const rows = opRows('seed-cifar', c, { forward: [3, 5, 4], backward: [9], linearsForward: [2.5, 4, 3.5], linearsBackward: [10] },
      { forward: [6], backward: [12], coreForward: [1], coreBackward: [2] }, '', '');
    expect(rows.map((r) => [r.op, r.pass, r.ours.status === 'ok' ? r.ours.medianSeconds : r.ours.status, r.torch.status === 'ok' ? r.torch.medianSeconds : null, !!r.derived]))
      .toEqual([['feed-forward (fc1, GELU, fc2)', 'forward', 4, 6, false], ['feed-forward (fc1, GELU, fc2)', 'backward', 9, 12, false],
        ['GELU', 'forward', 0.5, 1, true], ['GELU', 'backward', -1, 2, true]]);
    expect(rows[0].flops).toBe(4 * 64 * 65 * 128 * 512);
    const none = opRows('m', { op: 'layernorm', rows: 2, D: 3 }, { forward: [1] }, {}, 'x', 'PyTorch unavailable');
    expect(none.map((r) => [r.ours.status, r.torch.status === 'ok' ? '' : r.torch.reason])).toEqual([['ok', 'PyTorch unavailable'], ['failed', 'PyTorch unavailable']]);
  });
});

describe('bench target checks', () => {
  const ok = (medianSeconds: number) => ({ status: 'ok' as const, samples: [medianSeconds], medianSeconds, maxRssKb: null });
  /** Each peer in two variants: the one given and one 10% slower (the faster must stand for the peer). */
  const model = (id: string, mode: Mode, ours: number, peers: [PeerName, number][], batch = spec(id).batch): ModelResult => ({
    model: id, title: id, batch, mode, unit: 'img/s', items: 1, flops: 100e9, ours: ok(ours),
    peers: peers.flatMap(([name, s]) => [{ name, variant: 'slow', outcome: ok(1.1 * s), agreement: null }, { name, variant: 'fast', outcome: ok(s), agreement: null }]),
  });
  const res: Results = {
    date: '', command: '', machine: { cpu: 'Test CPU' }, options: {}, peers: {}, isa: 'avx2', ops: [],
    peaks: [{ isa: 'scalar', gflops: 10, threads: 2 }, { isa: 'avx2', gflops: 200, threads: 2 }, { isa: 'avx512', gflops: 400, threads: 2 }],
    models: [
      model('seed-cifar', 'train', 1, [['PyTorch', 1.3]]),
      model('seed-stl10', 'train', 0.5, [['PyTorch', 0.6]]),
      model('vit-b16-b8', 'train', 1, [['PyTorch', 1.5]], 4),
      model('seed-cifar', 'infer', 1, [['onnxruntime-node', 2], ['PyTorch', 1.2]]),
      model('seed-stl10', 'infer', 1, [['onnxruntime-node', 1.4], ['PyTorch', 1.5]]),
      model('vit-b16-b1', 'infer', 1, [['PyTorch', 3]]),
      model('seed-cifar', 'int8', 1, [['onnxruntime-node', 1.5]]),
      model('vit-b16-b1', 'int8', 1, [['onnxruntime-node', 1.2]]),
    ],
  };

  it('judge each target of issue 12 from the run: against the faster peer, on the ISA that ran, at the model\'s own batch', () => {
    const rows = targetChecks(res).map((c) => `${c.target} | ${c.subject} | ${c.measured} | ${c.status}`);
    expect(rows).toEqual([
      'training step ≥ 1.3× PyTorch 2.x | seed-cifar | 1.30× PyTorch (fastest runs 1.30×) | met',
      'training step ≥ 1.3× PyTorch 2.x | seed-stl10 | 1.20× PyTorch (fastest runs 1.20×) | not met',
      'training step ≥ 1.1× PyTorch 2.x | vit-b16-b8 | 1.50× PyTorch (fastest runs 1.50×) (at batch 4, not 8) | not measured',
      'training step ≥ 1.1× PyTorch 2.x | transformer-base | — | not measured',
      'training step ≥ 65% of the FMA peak | seed-stl10 | 100% of 200 GFLOP/s (avx2; fastest run 100%) | met',
      'training step ≥ 65% of the FMA peak | vit-b16-b8 | 50% of 200 GFLOP/s (avx2; fastest run 50%) (at batch 4, not 8) | not measured',
      'inference ≥ 1.3× the faster of onnxruntime-node and PyTorch 2.x | seed-cifar | 1.20× PyTorch (fastest runs 1.20×) | not met',
      'inference ≥ 1.3× the faster of onnxruntime-node and PyTorch 2.x | seed-stl10 | 1.40× onnxruntime (fastest runs 1.40×) | met',
      'inference ≥ 1.1× the faster of onnxruntime-node and PyTorch 2.x | vit-b16-b1 | 3.00× PyTorch (fastest runs 3.00×) (onnxruntime not measured) | not measured',
      'inference ≥ 1.1× the faster of onnxruntime-node and PyTorch 2.x | vit-b16-b8 | — | not measured',
      'inference ≥ 1.1× the faster of onnxruntime-node and PyTorch 2.x | transformer-base | — | not measured',
      'int8 inference ≥ 1.3× onnxruntime-node int8 (quantize_dynamic) | seed-cifar | 1.50× onnxruntime (fastest runs 1.50×) | met',
      'int8 inference ≥ 1.3× onnxruntime-node int8 (quantize_dynamic) | seed-stl10 | — | not measured',
      'int8 inference ≥ 1.3× onnxruntime-node int8 (quantize_dynamic) | vit-b16-b1 | 1.20× onnxruntime (fastest runs 1.20×) | not met',
      'int8 inference ≥ 1.3× onnxruntime-node int8 (quantize_dynamic) | vit-b16-b8 | — | not measured',
    ]);
    expect(render(res)).toMatch(/Targets \(issues 12 and 25\) on Test CPU, avx2: 4 met, 3 not met, 8 not measured\./);
  });

  it('give the share of the FMA peak each speed target takes beside ours and the peer\'s', () => {
    expect(targetChecks(res).map((c) => c.peakShares)).toEqual([
      '50% / 50% / 38% PyTorch', '108% / 100% / 83% PyTorch', '37% / 50% / 33% PyTorch', '—', '—', '—',
      '54% / 50% / 42% PyTorch', '46% / 50% / 36% onnxruntime', '18% / 50% / 17% PyTorch', '—', '—',
      '43% / 50% / 33% onnxruntime', '—', '54% / 50% / 42% onnxruntime', '—',
    ]);
    expect(targetTable(targetChecks(res))).toMatch(/\| seed-stl10 +\| 1\.20× PyTorch \(fastest runs 1\.20×\) +\| not met +\| 108% \/ 100% \/ 83% PyTorch +\|/);
  });

  it('print a ratio just under its goal with the digits that show it is under', () => {
    const m = model('seed-cifar', 'train', 1, [['PyTorch', 1.2996]]);
    expect(targetChecks({ ...res, models: [m] })[0]).toMatchObject({ measured: '1.2996× PyTorch (fastest runs 1.30×)', status: 'not met' });
  });

  it('judge by medians, and print the ratio of the fastest runs beside them', () => {
    const spread = (xs: number[]) => ({ status: 'ok' as const, samples: xs, medianSeconds: [...xs].sort((a, b) => a - b)[xs.length >> 1], maxRssKb: null });
    const m: ModelResult = { ...model('seed-cifar', 'train', 1, []), ours: spread([1, 3, 2]),
      peers: [{ name: 'PyTorch', variant: 'a', outcome: spread([4, 1.5, 5]), agreement: null }, { name: 'PyTorch', variant: 'b', outcome: spread([3, 0.9, 3]), agreement: null }] };
    expect(targetChecks({ ...res, models: [m] })[0]).toMatchObject({ measured: '1.50× PyTorch (fastest runs 0.900×)', status: 'met' });
  });

  it('break our step down into its native ops and what is left outside them', () => {
    const m: ModelResult = { ...model('seed-cifar', 'train', 1, []),
      breakdown: { stepMs: 200, ops: [{ op: 'feedforwardBackward', ms: 120, calls: 4 }, { op: 'attentionBackward', ms: 50, calls: 4 }] } };
    expect(breakdownTable([m])).toMatch(/\| seed-cifar \| training \| 200 +\| 170 ms \(85%\) +\| 30.0 ms \(15%\) +\| feedforwardBackward 120 \(4\), attentionBackward 50.0 \(4\) \|/);
  });

  it('put the ratio against the faster peer in the model table', () => {
    expect(render(res)).toMatch(/\| seed-cifar +\| 64 +\| inference +\| 1\.00 img\/s +\| 0\.500 img\/s +\| 0\.833 img\/s +\| 1\.20× PyTorch/);
  });
});

function runBench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { cwd: path.resolve(__dirname, '..'), maxBuffer: 1 << 24 },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }));
  });
}

describe('npm run bench -- --quick', () => {
  it('runs the tiny ViT and Transformer, their operators and the target judge end to end and writes the JSON', { timeout: 600_000 }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-bench-'));
    const out = path.join(dir, 'results.json');
    const r = await runBench(['--quick', '--models', 'tiny,tiny-s2s', '--warmup', '0', '--reps', '1', '--out', out, '--cache-dir', path.join(dir, 'cache')]);
    expect(r.stderr).not.toMatch(/^bench: /m);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\| model +\| batch/);
    expect(r.stdout).toMatch(/\| model +\| op +\| pass/);
    // Issues 12's 11 and 25's 4 int8 targets are not measured at these models; issue 25's 4 bf16 ones are where our kernels run avx512bf16.
    const [, met, notMet, unmeasured] = /Targets \(issues 12 and 25\) on .*: (\d+) met, (\d+) not met, (\d+) not measured/.exec(r.stdout)!.map(Number);
    expect(met + notMet + unmeasured).toBe(19);
    expect(unmeasured).toBeGreaterThanOrEqual(15);
    expect(r.stdout).toMatch(/\| model +\| step +\| ours fp32 +\| ours bf16 +\| bf16 ÷ fp32/);
    const res = JSON.parse(fs.readFileSync(out, 'utf8')) as Results;

    expect(res.peaks.length).toBeGreaterThan(0);
    for (const p of res.peaks) expect(p.gflops).toBeGreaterThan(0);
    expect(res.peaks.map((p) => p.isa)).toContain(res.isa);
    expect(res.models.map((m) => `${m.model} ${m.mode}`)).toEqual(['tiny infer', 'tiny int8', 'tiny train', 'tiny-s2s infer', 'tiny-s2s int8', 'tiny-s2s train']);
    expect(r.stdout).toMatch(/\| model +\| step +\| step ms \(ops timed\) +\| in native ops/);
    for (const m of res.models) {
      expect(m.ours.status).toBe('ok');
      expect(m.oursVariants!.map((v) => [v.variant, v.outcome.status])).toEqual([['threads sleep', 'ok'], ['threads spin 100 µs', 'ok']]);
      expect(m.flops).toBeGreaterThan(0);
      // Our step op by op: the ops it ran, timed inside it, within the step's time.
      const opsMs = m.breakdown!.ops.reduce((a, o) => a + o.ms, 0);
      expect(m.breakdown!.ops.map((o) => o.op)).toContain(m.model === 'tiny' ? 'attentionForward' : 'embeddingForward');
      expect(opsMs).toBeGreaterThan(0);
      expect(opsMs).toBeLessThanOrEqual(m.breakdown!.stepMs);
      expect([...new Set(m.peers.map((p) => p.name))]).toEqual(
        m.mode === 'infer' ? ['onnxruntime-node', 'PyTorch'] : m.mode === 'int8' ? ['onnxruntime-node'] : ['PyTorch']);
      for (const p of m.peers) {
        // A missing peer (no PyTorch here) is reported, not a failure; one that ran ran the same model on the same inputs.
        expect(['ok', 'unavailable']).toContain(p.outcome.status);
        if (p.outcome.status !== 'ok') continue;
        if (m.mode === 'infer') expect(p.agreement!.maxAbsDiff).toBeLessThan(1e-3);
        // Two int8 quantizations of the same model (ours per row and channel, onnxruntime's per tensor).
        else if (m.mode === 'int8') expect(p.agreement!.maxAbsDiff).toBeLessThan(0.1 * Math.max(1, p.agreement!.maxAbs!));
        else expect(Math.abs(p.agreement!.oursLoss! - p.agreement!.peerLoss!)).toBeLessThan(1e-4);
      }
    }
    expect(new Set(res.ops.map((o) => o.model))).toEqual(new Set(['tiny', 'tiny-s2s']));
    expect(res.bf16!.map((b) => `${b.model} ${b.mode}`)).toEqual(['tiny infer', 'tiny train', 'tiny-s2s infer', 'tiny-s2s train']);
    for (const b of res.bf16!) expect([b.fp32.status, b.bf16.status]).toEqual(['ok', 'ok']);
    for (const o of res.ops.filter((x) => !x.derived)) expect(o.ours.status).toBe('ok');
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('bench loss curve (bench/loss_curve.ts)', () => {
  const tiny = spec('tiny').arch as ViTArch;

  it('compares two curves window by window, relative to the second', () => {
    const b = Array.from({ length: 45 }, (_, i) => 2 - i / 50), a = b.map((v, i) => (i < 20 ? v : 1.1 * v));
    const w = windowRelDiffs(a, b);
    expect(w).toHaveLength(2);  // the last 5 steps are a partial window, dropped
    expect(w[0]).toBe(0);
    expect(w[1]).toBeCloseTo(0.1, 12);
    const [check, ...others] = curveComparisons({ fp32: b, bf16: a });
    expect(check.what).toMatch(/ours bf16 vs ours fp32/);
    expect(check.worst).toBeCloseTo(0.1, 12);
    expect(others).toHaveLength(0);  // no PyTorch curves, no PyTorch rows
  });

  it('draws fresh, learnable batches: labels in range, each step its own images, the same for the same step', () => {
    const b0 = patternBatch(tiny, 4, 0), b1 = patternBatch(tiny, 4, 1);
    expect(b0.x).toHaveLength(4 * tiny.inChannels * tiny.imgSize ** 2);
    expect(Array.from(b0.y).every((c) => c >= 0 && c < tiny.numClasses)).toBe(true);
    expect(b1.x[0]).not.toBe(b0.x[0]);
    expect(patternBatch(tiny, 4, 1).x).toEqual(b1.x);
  });

  const python = [process.env.NF_BENCH_PYTHON, path.join(__dirname, '..', '.venv-bench', 'bin', 'python'), 'python3']
    .find((p) => p && (p === 'python3' || fs.existsSync(p)))!;
  it('bench/gpu/torch_curve.py computes the same batches (needs numpy; skips with a note without it)', async () => {
    const script = `import sys, json; sys.path.insert(0, 'bench/gpu'); import numpy as np; from torch_curve import pattern_batch
x, y = pattern_batch(json.loads(sys.argv[1]), 3, 5); print(json.dumps({'x': x.reshape(-1).tolist(), 'y': y.tolist()}))`;
    const run = await new Promise<{ code: number; out: string; err: string }>((resolve) =>
      execFile(python, ['-c', script, JSON.stringify(tiny)], { cwd: path.join(__dirname, '..'), maxBuffer: 1 << 26 },
        (e, out, err) => resolve({ code: e ? 1 : 0, out, err })));
    if (run.code !== 0 && /No module named 'numpy'|ENOENT/.test(run.err + run.out)) {
      console.log(`skipped: ${python} has no numpy (npm run bench:setup makes .venv-bench)`);
      return;
    }
    expect(run.err).toBe('');
    const theirs = JSON.parse(run.out) as { x: number[]; y: number[] }, ours = patternBatch(tiny, 3, 5);
    expect(theirs.y).toEqual(Array.from(ours.y));
    const worst = theirs.x.reduce((m, v, i) => Math.max(m, Math.abs(v - ours.x[i])), 0);
    expect(worst).toBeLessThan(1e-6);  // float32 images; sin/log/cos of two libms may differ in the last bit
  });
});
