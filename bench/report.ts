/**
 * The harness's output: Markdown tables (readable in a terminal, pasteable into the README) of the
 * models, the operators and the targets, and the JSON file of the same numbers.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { bf16Speedup, type Bf16Row } from './bf16_suite';
import type { OpFamily } from './cli';
import { stepBudget, total, type BudgetRow } from './op_budget';
import { targetChecks, speedup, type TargetCheck } from './targets';
import { bestOf, modeName, shortName as short, type ModelResult, type OpRow, type Outcome, type PeerName, type Results } from './results';

const fmt = (x: number, digits = 1) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
/** Three significant digits below 100 (0.0412, 5.53, 48.3), whole numbers above. */
const sig = (x: number) => (Math.abs(x) >= 100 ? fmt(x, 0) : x.toPrecision(3));
const mb = (kb: number | null | undefined) => (kb == null ? '—' : fmt(kb / 1024, 0));

/** What our bf16 products ran on, for the bf16 table's heading. */
function bf16KernelsText(res: Results): string {
  if (res.bf16Kernels === 'amx') return 'AMX tiles (tdpbf16ps) for the GEMMs';
  if (res.bf16Kernels === 'vdpbf16ps' || (!res.bf16Kernels && res.isa === 'avx512bf16')) return 'vdpbf16ps';
  return 'the bf16 rounding emulated with fp32 FMA: this CPU has no avx512_bf16';
}

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

function cell(o: Outcome | undefined, items: number, unit: string): string {
  if (!o) return '—';
  if (o.status === 'ok') return `${sig(items / o.medianSeconds)} ${unit}${o.note ? ' *' : ''}`;
  if (o.status === 'timeout' && o.atLeastSeconds) return `< ${sig(items / o.atLeastSeconds)} ${unit}`;
  return o.status;
}

const pct = (gflops: number | null, peak: number) => (gflops == null || !peak ? '—' : `${fmt((100 * gflops) / peak, 0)}%`);
const PEER_COLUMNS: readonly PeerName[] = ['onnxruntime-node', 'PyTorch'];

/** ours against the faster peer that ran, e.g. "1.23× PyTorch", and the ratio of the fastest runs. */
function bestRatio(r: ModelResult): [string, string] {
  const s = speedup(r, [...new Set(r.peers.map((p) => p.name))]);
  return [s.ratio == null ? '—' : `${sig(s.ratio)}× ${short(s.best!)}`, s.fastestRuns == null ? '—' : `${sig(s.fastestRuns)}×`];
}

export function modelTable(rows: ModelResult[], peak: number): string {
  return table(
    ['model', 'batch', 'step', 'ours', ...PEER_COLUMNS.map(short), 'ours ÷ faster peer', 'fastest runs', 'GFLOP/s', '% FMA peak', 'peak RSS MB ours / onnxruntime / PyTorch'],
    rows.map((r) => {
      const g = rate(r.ours, r.flops / 1e9), bound = g?.upper ? '< ' : '';
      const peer = (name: PeerName) => bestOf(r.peers, name)?.outcome;
      return [r.model, String(r.batch), modeName(r.mode), cell(r.ours, r.items, r.unit),
        ...PEER_COLUMNS.map((n) => cell(peer(n), r.items, r.unit)), ...bestRatio(r),
        g ? `${bound}${sig(g.value)}` : '—', g ? `${bound}${pct(g.value, peak)}` : '—',
        [r.ours.maxRssKb, ...PEER_COLUMNS.map((n) => peer(n)?.maxRssKb)].map(mb).join(' / ')];
    }));
}

/** Each peer's variants side by side (the table shows the faster), e.g. "PyTorch 139 img/s (OpenMP default), 444 img/s (OMP_WAIT_POLICY=PASSIVE)". */
function variantNote(r: ModelResult, name: PeerName | 'ours'): string | null {
  const vs = name === 'ours' ? r.oursVariants ?? [] : r.peers.filter((p) => p.name === name);
  if (vs.length < 2) return null;
  return `${name === 'ours' ? 'ours' : short(name)} ${vs.map((p) => `${cell(p.outcome, r.items, r.unit)} (${p.variant})`).join(', ')}`;
}

/** Notes under the model table: the peers' variants, the agreement checks, and every measurement that did not run. */
export function modelNotes(rows: ModelResult[]): string[] {
  const notes: string[] = [];
  for (const r of rows) {
    const tag = `${r.model} ${modeName(r.mode)}`;
    const ours = r.oursVariants?.map((v) => [`ours (${v.variant})`, v.outcome] as const) ?? [['ours', r.ours] as const];
    for (const [who, o] of [...ours, ...r.peers.map((p) => [`${p.name} (${p.variant})`, p.outcome] as const)] as const) {
      if (o.status !== 'ok') notes.push(`${tag}, ${who}: ${o.status} — ${o.reason}`);
      else if (o.note) notes.push(`${tag}, ${who} (*): ${o.note}`);
    }
    const variants = (['ours', ...PEER_COLUMNS] as const).map((n) => variantNote(r, n)).filter(Boolean);
    if (variants.length) notes.push(`${tag}: ${variants.join('; ')}`);
    const logits = PEER_COLUMNS.map((n) => r.peers.find((p) => p.name === n && p.agreement?.maxAbsDiff !== undefined)).filter((p) => !!p)
      .map((p) => `${short(p.name)} max |Δ| ${p.agreement!.maxAbsDiff!.toExponential(1)}`);
    if (logits.length) notes.push(`${tag}: logits agree with ${logits.join(', ')} (max |logit| ${fmt(r.peers.find((p) => p.agreement?.maxAbs)?.agreement?.maxAbs ?? NaN, 2)})`);
    const loss = r.peers.find((p) => p.agreement?.oursLoss !== undefined)?.agreement;
    if (loss) notes.push(`${tag}: first-step loss ours ${fmt(loss.oursLoss!, 6)}, PyTorch ${fmt(loss.peerLoss!, 6)} (|Δ| ${Math.abs(loss.oursLoss! - loss.peerLoss!).toExponential(1)})`);
  }
  return notes;
}

function ms(o: Outcome): string {
  if (o.status !== 'ok') return o.status;
  const x = o.medianSeconds * 1e3;
  return x <= 0 ? '≤ 0' : x < 0.1 ? fmt(x, 3) : x < 10 ? fmt(x, 2) : fmt(x, 1);
}

export function opTable(rows: OpRow[], peak: number): string {
  return table(['model', 'op', 'pass', 'shape', 'ours ms', 'PyTorch ms', 'ours ÷ PyTorch', 'ours GFLOP/s', '% FMA peak'],
    rows.map((r) => {
      const a = r.ours.status === 'ok' && r.ours.medianSeconds > 0 ? r.ours.medianSeconds : null;
      const b = r.torch.status === 'ok' ? r.torch.medianSeconds : null;
      const g = a && r.flops ? r.flops / a / 1e9 : null;
      return [r.model, r.op, r.pass, r.shape, `${ms(r.ours)}${r.derived ? ' †' : ''}`, ms(r.torch), a && b ? `${sig(b / a)}×` : '—',
        g == null ? '—' : sig(g), pct(g, peak)];
    }));
}

/** Which PyTorch variant was faster how often, and the reasons behind the operator table's missing cells (once each). */
function opNotes(rows: OpRow[]): string[] {
  const wins = new Map<string, number>();
  for (const r of rows) if (r.torchVariant) wins.set(r.torchVariant, (wins.get(r.torchVariant) ?? 0) + 1);
  const reasons = new Set<string>(wins.size ? [`PyTorch's faster variant per row: ${[...wins].map(([v, n]) => `${v} ${n}`).join(', ')}`] : []);
  for (const r of rows)
    for (const [who, o] of [['ours', r.ours], ['PyTorch', r.torch]] as const) if (o.status !== 'ok') reasons.add(`${r.model}, ${who}: ${o.status} — ${o.reason}`);
  return [...reasons];
}

const BUDGET_COLUMNS: readonly [OpFamily, string][] = [['attention', 'attention'], ['feedforward', 'feed-forward'],
  ['layernorm', 'LayerNorm'], ['linear', 'head GEMMs'], ['adamw', 'AdamW']];

/** Per model and family: ours / PyTorch ms per training step (PyTorch ÷ ours). */
export function budgetTable(rows: BudgetRow[]): string {
  const pair = (a: number | null | undefined, b: number | null | undefined) => {
    if (a === undefined && b === undefined) return '—';
    const t = (s: number | null | undefined) => (s == null ? '—' : fmt(s * 1e3, s < 0.1 ? 1 : 0));
    return `${t(a)} / ${t(b)}${a && b ? ` (${sig(b / a)}×)` : ''}`;
  };
  return table(['model', ...BUDGET_COLUMNS.map(([, h]) => `${h}: ms ours / PyTorch`), 'Σ ops', 'training step, PyTorch ÷ ours'],
    rows.map((r) => [r.model, ...BUDGET_COLUMNS.map(([f]) => pair(r.ours[f], r.torch[f])), pair(total(r.ours), total(r.torch)),
      r.stepRatio == null ? '—' : `${sig(r.stepRatio)}×`]));
}

/** The bf16 rows: ours at fp32 and bf16, their ratio, PyTorch autocast bf16 and ours bf16 against it. */
export function bf16Table(rows: Bf16Row[]): string {
  return table(['model', 'step', 'ours fp32', 'ours bf16', 'bf16 ÷ fp32', 'PyTorch autocast bf16', 'ours bf16 ÷ PyTorch bf16'],
    rows.map((r) => {
      const up = bf16Speedup(r), a = r.torchBf16.status === 'ok' && r.bf16.status === 'ok' ? r.torchBf16.medianSeconds / r.bf16.medianSeconds : null;
      return [`${r.model} b${r.batch}`, r.mode === 'infer' ? 'inference' : 'training', cell(r.fp32, r.items, r.unit), cell(r.bf16, r.items, r.unit),
        up == null ? '—' : `${sig(up)}×`, cell(r.torchBf16, r.items, r.unit), a == null ? '—' : `${sig(a)}×`];
    }));
}

export function targetTable(checks: TargetCheck[]): string {
  return table(['target', 'model', 'measured', '', 'FMA peak it takes / ours / peer'],
    checks.map((c) => [c.target, c.subject, c.measured, c.status, c.peakShares]));
}

/** Where our steps go, measured inside them (step_breakdown.ts): the native ops, what is left outside them, the largest ops. */
export function breakdownTable(rows: ModelResult[]): string {
  return table(['model', 'step', 'step ms (ops timed)', 'in native ops', 'outside the ops (JS, GC, allocation)', 'largest ops: ms per step (calls)'],
    rows.filter((r) => r.breakdown).map((r) => {
      const b = r.breakdown!, inOps = b.ops.reduce((a, o) => a + o.ms, 0), share = (ms: number) => `${sig(ms)} ms (${fmt((100 * ms) / b.stepMs, 0)}%)`;
      return [r.model, modeName(r.mode), sig(b.stepMs), share(inOps), share(Math.max(0, b.stepMs - inOps)),
        b.ops.slice(0, 4).map((o) => `${o.op} ${sig(o.ms)} (${fmt(o.calls, 0)})`).join(', ')];
    }));
}

/** The whole report as text. */
export function render(res: Results): string {
  const peak = res.peaks.find((p) => p.isa === res.isa);
  const m = res.machine;
  const out = [
    `## nodeformer benchmark, ${res.date}`,
    '',
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB; our kernels ran ${res.isa}; load average ${m.loadStart} at the start, ${m.loadEnd} at the end; Node ${m.node}.`,
    `FP32 FMA peak, measured with ${peak?.threads ?? '?'} threads (in their CPU time, so other processes do not lower it): ${res.peaks.map((p) => `${p.isa} ${fmt(p.gflops)} GFLOP/s`).join(', ')}.`,
    ...Object.entries(res.peers).map(([k, v]) => `${k}: ${v}.`),
    `Command: \`${res.command}\`; ${res.options.threads} threads everywhere, ${res.options.rounds} round(s) (ours and the peers alternating, timed runs pooled), warm-up ${res.options.warmup}, at most ${res.options.reps} timed runs per measurement and round.`,
  ];
  if (res.models.length) {
    out.push('', `Models (median of the timed runs; throughput in images or source+target tokens per second; ratio = the faster peer's median time ÷ ours, and the same for the fastest runs of each side; GFLOP/s ours, % of the ${res.isa} peak):`, '',
      modelTable(res.models, peak?.gflops ?? 0));
    const notes = modelNotes(res.models);
    if (notes.length) out.push('', ...notes.map((n) => `- ${n}`));
    if (res.models.some((r) => r.breakdown))
      out.push('', 'Where our steps go, measured inside them: a few extra runs after the timed ones, with every native op timed; what the ops do not account for is the JavaScript between them, the garbage collector and allocation:', '',
        breakdownTable(res.models));
  }
  if (res.ops.length) {
    out.push('', 'Operators at each model\'s shapes, ours (the raw ops of lib/native) against PyTorch 2.x eager (autograd on; ratio = PyTorch ms ÷ ours ms):', '',
      opTable(res.ops, peak?.gflops ?? 0), '',
      '- † ours is fused into a layer op here: its time is the median of the paired differences between that layer and the layer\'s own Linears, timed in turn, set against PyTorch\'s separate op; ≤ 0 means within the noise.');
    out.push(...opNotes(res.ops).map((n) => `- ${n}`));
    const budget = stepBudget(res.models, res.ops, (res.options.ops as OpFamily[] | undefined) ?? []);
    if (budget.length)
      out.push('', 'Where a training step goes, op by op: each operator\'s median × the calls one step makes (the Linears inside attention and feed-forward counted there), ours / PyTorch ms (PyTorch ÷ ours), beside the models\' training-step ratio (embeddings, residual adds, the loss, a ViT\'s head and overhead are only in the latter):', '',
        budgetTable(budget));
  }
  if (res.bf16?.length)
    out.push('', `Precision bf16 (issue 25; median of the timed runs, ours with its threads sleeping; our bf16 runs ${bf16KernelsText(res)}; PyTorch under torch.autocast('cpu', dtype=torch.bfloat16), its faster thread variant):`, '',
      bf16Table(res.bf16));
  const checks = targetChecks(res);
  const count = (s: TargetCheck['status']) => checks.filter((c) => c.status === s).length;
  out.push('', `Targets (issues 12 and 25) on ${m.cpu}, ${res.isa}: ${count('met')} met, ${count('not met')} not met, ${count('not measured')} not measured. ` +
    '(No regression in the parity tests: judged by `npm test`, not by this run.) The last column is the share of the FMA peak a speed target takes ' +
    '(the model\'s FLOPs in the faster peer\'s median time ÷ the goal) beside ours and that peer\'s.', '', targetTable(checks));
  return out.join('\n');
}

export function writeJson(file: string, res: Results): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(res, null, 2)}\n`);
}
