/**
 * The speed targets of issues 12 and 25, judged from one run's results: each is a ratio against PyTorch
 * 2.x eager (training), against the faster of onnxruntime-node and PyTorch (inference), against
 * onnxruntime-node on onnxruntime's own quantize_dynamic(QInt8) export (int8 inference, issue 25), or a
 * share of the measured FMA peak of the ISA our kernels ran on; each is met, not met, or not
 * measured (a model or peer that was not run or failed, or a model run at another batch than its
 * own, which --batch or --quick do). A ratio is the peer's median step time
 * over ours, so 1.3× means ours takes 1/1.3 of the peer's time; the ratio of the fastest runs is
 * printed beside it (on a shared machine, the closest to the code's own speed), but the medians judge.
 * Each speed target also gives the share of the FMA peak it takes: the model's FLOPs in the peer's
 * median time ÷ the goal, against the shares of ours and of the peer, so that a target which asks
 * for more than a GEMM can do on this machine shows as such.
 */
import { BF16_GOAL, bf16Speedup } from './bf16_suite';
import { bestOf, fastestRun, seconds, shortName as short, type Mode, type ModelResult, type PeerName, type Results } from './results';
import { MODELS } from './specs';

export interface TargetCheck {
  target: string;
  /** The model it was checked on. */
  subject: string;
  /** What was measured, as printed (e.g. "0.86× PyTorch", "62%"); '—' when not measured. */
  measured: string;
  status: 'met' | 'not met' | 'not measured';
  /** Speed targets: the share of the FMA peak meeting it takes / ours / the peer's, e.g. "96% / 91% / 87% onnxruntime"; '—' when unknown. */
  peakShares: string;
}

interface SpeedTarget { mode: Mode; goal: number; models: string[] }

/** Issue 12's ratios, in its order. Inference is judged against the faster of both peers. */
export const SPEED_TARGETS: readonly SpeedTarget[] = [
  { mode: 'train', goal: 1.3, models: ['seed-cifar', 'seed-stl10'] },
  { mode: 'train', goal: 1.1, models: ['vit-b16-b8', 'transformer-base'] },
  { mode: 'infer', goal: 1.3, models: ['seed-cifar', 'seed-stl10'] },
  { mode: 'infer', goal: 1.1, models: ['vit-b16-b1', 'vit-b16-b8', 'transformer-base'] },
  // Issue 25: int8 inference against onnxruntime's own int8 (quantize_dynamic, QInt8) of the same weights.
  { mode: 'int8', goal: 1.3, models: ['seed-cifar', 'seed-stl10', 'vit-b16-b1', 'vit-b16-b8'] },
];
/** Issue 12's share of the FMA peak for the training step. */
export const PEAK_TARGET = { goal: 0.65, models: ['seed-stl10', 'vit-b16-b8'] } as const;

/** The peers each mode is judged against. */
const PEERS_OF: Record<Mode, readonly PeerName[]> = { infer: ['onnxruntime-node', 'PyTorch'], int8: ['onnxruntime-node'], train: ['PyTorch'] };

const times = (x: number) => `${x.toPrecision(3)}×`;
/** x as `times` prints it, with more digits where three would round it onto the other side of goal (1.2996 → 1.2996×, not 1.30×). */
function timesAgainst(x: number, goal: number): string {
  let digits = 3;
  while (digits < 6 && Number(x.toPrecision(digits)) >= goal !== x >= goal) digits++;
  return `${x.toPrecision(digits)}×`;
}

export interface Speedup {
  /** The faster peer's median over ours (each peer in its faster variant); null when a side did not run. */
  ratio: number | null;
  /** Which peer that is. */
  best: PeerName | null;
  /** The fastest run of any of those peers' variants over our fastest run. */
  fastestRuns: number | null;
  /** Requested peers with no measurement. */
  missing: PeerName[];
}

/** ours against the faster of `peers`: the ratio of medians, which peer, the ratio of fastest runs, and which peers are missing. */
export function speedup(m: ModelResult | undefined, peers: readonly PeerName[]): Speedup {
  const ours = seconds(m?.ours), oursFastest = fastestRun(m?.ours);
  const ran = peers.map((name) => ({ name, s: seconds(m && bestOf(m.peers, name)?.outcome) }));
  const missing = ran.filter((p) => p.s == null).map((p) => p.name);
  const fastest = ran.filter((p): p is { name: PeerName; s: number } => p.s != null).sort((a, b) => a.s - b.s)[0];
  const peerRuns = (m?.peers ?? []).filter((p) => peers.includes(p.name)).map((p) => fastestRun(p.outcome)).filter((x): x is number => x != null);
  return { ratio: ours && fastest ? fastest.s / ours : null, best: fastest?.name ?? null, missing,
    fastestRuns: oursFastest && peerRuns.length ? Math.min(...peerRuns) / oursFastest : null };
}

/** A measured value that does not answer the target: "not measured", saying why. */
const partial = (c: Omit<TargetCheck, 'status'>, why: string): TargetCheck => ({ ...c, measured: `${c.measured} (${why})`, status: 'not measured' });

/** The run's result for a target's model and mode, and why it cannot answer the target, if it cannot. */
function resultOf(res: Results, id: string, mode: Mode): { m: ModelResult | undefined; why: string | null } {
  const m = res.models.find((r) => r.model === id && r.mode === mode), own = MODELS.find((s) => s.id === id)?.batch;
  return { m, why: m && own !== undefined && m.batch !== own ? `at batch ${m.batch}, not ${own}` : null };
}

/** "needed / ours / peer" shares of the FMA peak of the ISA that ran, for a speed target of `goal` (s has both sides). */
function peakShares(res: Results, m: ModelResult, s: Speedup, goal: number): string {
  const peak = res.peaks.find((p) => p.isa === res.isa), ours = seconds(m.ours);
  if (!peak || !ours || s.ratio == null) return '—';
  const share = (t: number) => `${Math.round((100 * m.flops) / t / 1e9 / peak.gflops)}%`, peer = ours * s.ratio;
  return `${share(peer / goal)} / ${share(ours)} / ${share(peer)} ${short(s.best!)}`;
}

function speedCheck(res: Results, t: SpeedTarget, id: string): TargetCheck {
  const target = t.mode === 'train' ? `training step ≥ ${t.goal.toFixed(1)}× PyTorch 2.x`
    : t.mode === 'int8' ? `int8 inference ≥ ${t.goal.toFixed(1)}× onnxruntime-node int8 (quantize_dynamic)`
      : `inference ≥ ${t.goal.toFixed(1)}× the faster of onnxruntime-node and PyTorch 2.x`;
  const { m, why } = resultOf(res, id, t.mode), s = speedup(m, PEERS_OF[t.mode]);
  if (s.ratio == null) return { target, subject: id, measured: '—', status: 'not measured', peakShares: '—' };
  const c = { target, subject: id, measured: `${timesAgainst(s.ratio, t.goal)} ${short(s.best!)}${s.fastestRuns ? ` (fastest runs ${times(s.fastestRuns)})` : ''}`,
    peakShares: peakShares(res, m!, s, t.goal) };
  if (s.missing.length) return partial(c, `${s.missing.map(short).join(', ')} not measured`);
  if (why) return partial(c, why);
  return { ...c, status: s.ratio >= t.goal ? 'met' : 'not met' };
}

function peakCheck(res: Results, id: string): TargetCheck {
  const target = `training step ≥ ${Math.round(PEAK_TARGET.goal * 100)}% of the FMA peak`;
  const { m, why } = resultOf(res, id, 'train');
  const peak = res.peaks.find((p) => p.isa === res.isa), s = seconds(m?.ours), f = fastestRun(m?.ours);
  if (!m || !peak || !s || !f) return { target, subject: id, measured: '—', status: 'not measured', peakShares: '—' };
  const share = (t: number) => m.flops / t / 1e9 / peak.gflops;
  const c = { target, subject: id, peakShares: '—',
    measured: `${Math.round(100 * share(s))}% of ${peak.gflops.toFixed(0)} GFLOP/s (${res.isa}; fastest run ${Math.round(100 * share(f))}%)` };
  return why ? partial(c, why) : { ...c, status: share(s) >= PEAK_TARGET.goal ? 'met' : 'not met' };
}

/** Issue 25's bf16 target on each bf16 row: ours at bf16 ≥ 1.6× ours at fp32, judged only where our kernels ran vdpbf16ps. */
function bf16Checks(res: Results): TargetCheck[] {
  return (res.bf16 ?? []).map((r) => {
    const target = `bf16 ${r.mode === 'infer' ? 'inference' : 'training step'} ≥ ${BF16_GOAL.toFixed(1)}× our fp32 (avx512_bf16)`;
    const up = bf16Speedup(r), c = { target, subject: `${r.model} b${r.batch}`, measured: up == null ? '—' : `${up.toPrecision(3)}×`, peakShares: '—' };
    if (up == null) return { ...c, status: 'not measured' };
    if (res.isa !== 'avx512bf16') return partial(c, `our kernels ran ${res.isa}, not avx512bf16`);
    return { ...c, status: up >= BF16_GOAL ? 'met' : 'not met' };
  });
}

/** Every target of issues 12 and 25, in the issues' order (int8, then bf16), each judged from this run or "not measured". */
export function targetChecks(res: Results): TargetCheck[] {
  const speed = (mode: Mode) => SPEED_TARGETS.filter((t) => t.mode === mode).flatMap((t) => t.models.map((id) => speedCheck(res, t, id)));
  return [...speed('train'), ...PEAK_TARGET.models.map((id) => peakCheck(res, id)), ...speed('infer'), ...speed('int8'), ...bf16Checks(res)];
}
