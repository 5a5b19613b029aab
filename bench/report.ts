/**
 * The harness's output: Markdown tables (readable in a terminal, pasteable into the README) and
 * the JSON file of the same numbers.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { attentionForwardFlops, gemmFlops } from './flops';
import { targetChecks, type TargetCheck } from './targets';
import type { AttentionResult, GemmResult, IsaPeak, LayerNormResult, ModelResult, Outcome, Results } from './results';

const fmt = (x: number, digits = 1) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
/** Three significant digits below 100 (0.0412, 5.53, 48.3), whole numbers above. */
const sig = (x: number) => (x >= 100 ? fmt(x, 0) : x.toPrecision(3));
const mb = (kb: number | null | undefined) => (kb == null ? '—' : `${fmt(kb / 1024, 0)} MB`);
const bytes = (b: number | null) => (b == null ? '—' : b >= 2 ** 30 ? `${fmt(b / 2 ** 30, 2)} GiB` : `${fmt(b / 2 ** 20, 1)} MiB`);

function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

/**
 * Throughput (items per second) of an outcome: exact, or an upper bound for a run that was stopped
 * at the time limit before finishing (it takes at least `atLeastSeconds`); null when unknown.
 */
function rate(o: Outcome | undefined, items: number): { value: number; upper: boolean } | null {
  if (o?.status === 'ok') return { value: items / o.medianSeconds, upper: false };
  if (o?.status === 'timeout' && o.atLeastSeconds) return { value: items / o.atLeastSeconds, upper: true };
  return null;
}

/** ours ÷ peer throughput; "> x" or "< x" when one side only has a bound. */
function ratio(ours: Outcome, peer: Outcome | undefined, items: number): string {
  const a = rate(ours, items), b = rate(peer, items);
  if (!a || !b || (a.upper && b.upper)) return '—';
  return `${a.upper ? '< ' : b.upper ? '> ' : ''}${sig(a.value / b.value)}×`;
}

function cell(o: Outcome | undefined, items: number, unit: string): string {
  if (!o) return '—';
  if (o.status === 'ok') return `${sig(items / o.medianSeconds)} ${unit}${o.note ? ' *' : ''}`;
  if (o.status === 'timeout' && o.atLeastSeconds) return `< ${sig(items / o.atLeastSeconds)} ${unit}`;
  return o.status;
}

const pct = (gflops: number | null, peak: number) => (gflops == null || !peak ? '—' : `${fmt((100 * gflops) / peak, 0)}%`);

export function modelTable(rows: ModelResult[], peak: number): string {
  return table(
    ['model', 'batch', 'step', 'ours', 'peer', "peer's", 'ours ÷ peer', 'GFLOP/s', '% FMA peak', 'peak RSS ours', 'peak RSS peer'],
    rows.map((r) => {
      const g = rate(r.ours, r.flops / 1e9), bound = g?.upper ? '< ' : '';
      return [r.model, String(r.batch), r.mode === 'infer' ? 'inference' : 'training', cell(r.ours, r.items, r.unit),
        r.peer ? (r.peer.name === 'PyTorch' ? 'PyTorch' : 'onnxruntime') : '—', cell(r.peer?.outcome, r.items, r.unit),
        ratio(r.ours, r.peer?.outcome, r.items), g ? `${bound}${sig(g.value)}` : '—', g ? `${bound}${pct(g.value, peak)}` : '—',
        mb(r.ours.maxRssKb), mb(r.peer?.outcome.maxRssKb)];
    }));
}

/** Notes under the model table: peers' details, agreement checks, and every measurement that did not run. */
export function modelNotes(rows: ModelResult[]): string[] {
  const notes: string[] = [];
  for (const r of rows) {
    const tag = `${r.model} ${r.mode === 'infer' ? 'inference' : 'training'}`;
    for (const [who, o] of [['ours', r.ours], [r.peer?.name ?? '', r.peer?.outcome]] as const) {
      if (!o) continue;
      if (o.status !== 'ok') notes.push(`${tag}, ${who}: ${o.status} — ${o.reason}`);
      else if (o.note) notes.push(`${tag}, ${who} (*): ${o.note}`);
    }
    const a = r.agreement;
    if (a?.maxAbsDiff !== undefined) notes.push(`${tag}: logits agree with onnxruntime to max |Δ| ${a.maxAbsDiff.toExponential(1)} (max |logit| ${fmt(a.maxAbs ?? NaN, 2)})`);
    if (a?.oursLoss !== undefined) notes.push(`${tag}: first-step loss ours ${fmt(a.oursLoss, 5)}, PyTorch ${fmt(a.peerLoss ?? NaN, 5)}`);
  }
  const details = new Map(rows.filter((r) => r.peer?.detail).map((r) => [r.peer!.name, r.peer!.detail]));
  for (const [name, detail] of details) notes.push(`${name}: ${detail}`);
  return notes;
}

const ms = (o: Outcome) => (o.status === 'ok' ? fmt(o.medianSeconds * 1e3, o.medianSeconds < 0.01 ? 2 : 1) : o.status);
const gflopsOf = (o: Outcome | null | undefined, flops: number) => (o?.status === 'ok' ? flops / o.medianSeconds / 1e9 : null);

export function gemmTable(rows: GemmResult[], peaks: IsaPeak[]): string {
  return table(['GEMM', 'M×N×K', 'ISA', 'ms', 'GFLOP/s', '% FMA peak', 'OpenBLAS GFLOP/s', 'ours ÷ OpenBLAS'],
    rows.map((r) => {
      const flops = gemmFlops(r.M, r.N, r.K), g = gflopsOf(r.ours, flops), b = gflopsOf(r.openblas, flops);
      const peak = peaks.find((p) => p.isa === r.isa)?.gflops ?? 0;
      return [r.label, `${r.M}×${r.N}×${r.K}${r.transB ? ' (Bᵀ)' : ''}`, r.isa, ms(r.ours), g == null ? '—' : fmt(g), pct(g, peak),
        b == null ? (r.openblas && r.openblas.status !== 'unavailable' ? r.openblas.status : '—') : fmt(b), g != null && b != null ? `${sig(g / b)}×` : '—'];
    }));
}

export function attentionTable(rows: AttentionResult[]): string {
  return table(['attention T', 'B×H×Dh', 'ISA', 'fwd ms', 'bwd ms', 'fwd GFLOP/s', 'bwd GFLOP/s', 'saved for bwd', 'one [B,H,T,T] tensor', 'extra peak RSS'],
    rows.map((r) => {
      const f = attentionForwardFlops(r.B, r.T, r.D);
      const fg = gflopsOf(r.forward, f), bg = gflopsOf(r.backward, 2 * f);
      return [String(r.T), `${r.B}×${r.H}×${r.D / r.H}`, r.isa, ms(r.forward), ms(r.backward), fg == null ? '—' : fmt(fg),
        bg == null ? '—' : fmt(bg), bytes(r.savedBytes), bytes(r.naiveWeightsBytes), r.extraPeakRssKb == null ? '—' : bytes(r.extraPeakRssKb * 1024)];
    }));
}

export function layernormTable(rows: LayerNormResult[]): string {
  const gbs = (o: Outcome, bytesMoved: number) => (o.status === 'ok' ? fmt(bytesMoved / o.medianSeconds / 1e9) : '—');
  const us = (o: Outcome) => (o.status === 'ok' ? fmt(o.medianSeconds * 1e6, 0) : o.status);
  return table(['LayerNorm', 'rows×D', 'ISA', 'fwd µs', 'fwd GB/s', 'bwd µs', 'bwd GB/s'],
    rows.map((r) => {
      const n = 4 * r.rows * r.D;  // bytes of one [rows, D] float32 array
      return [r.label, `${r.rows}×${r.D}`, r.isa, us(r.forward), gbs(r.forward, 2 * n), us(r.backward), gbs(r.backward, 3 * n)];
    }));
}

/** The whole report as text. */
export function render(res: Results): string {
  const best = res.peaks.at(-1);
  const out = [
    `## nodeformer benchmark, ${res.date}`,
    '',
    `Machine: ${res.machine.cpu}, ${res.machine.cores} cores; load average ${res.machine.loadStart} at the start, ${res.machine.loadEnd} at the end; Node ${res.machine.node}.`,
    `FP32 FMA peak, measured with ${best?.threads ?? '?'} threads (in their CPU time, so other processes do not lower it): ${res.peaks.map((p) => `${p.isa} ${fmt(p.gflops)} GFLOP/s`).join(', ')}.`,
    `Peers: ${Object.entries(res.peers).map(([k, v]) => `${k}: ${v}`).join('; ')}.`,
  ];
  if (res.models.length) {
    out.push('', `Models (median of the timed runs; throughput in images or source+target tokens per second; % of the ${best?.isa} peak):`, '',
      modelTable(res.models, best?.gflops ?? 0));
    const notes = modelNotes(res.models);
    if (notes.length) out.push('', ...notes.map((n) => `- ${n}`));
  }
  const k = res.kernels;
  if (k.gemm.length) {
    out.push('', gemmTable(k.gemm, res.peaks));
    const blas = k.gemm.find((g) => g.openblas?.status === 'unavailable')?.openblas;
    if (blas && blas.status !== 'ok') out.push('', `- OpenBLAS: ${blas.reason}`);
  }
  if (k.attention.length) out.push('', attentionTable(k.attention));
  if (k.layernorm.length) out.push('', layernormTable(k.layernorm));
  const checks = targetChecks(res);
  if (checks.length) {
    const count = (s: TargetCheck['status']) => checks.filter((c) => c.status === s).length;
    out.push('', `Targets: ${count('met')} met, ${count('not met')} not met, ${count('not measured')} not measured.`, '',
      table(['target', 'on', 'measured', ''], checks.map((c) => [c.target, c.subject, c.measured, c.status])));
  }
  return out.join('\n');
}

export function writeJson(file: string, res: Results): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(res, null, 2)}\n`);
}
