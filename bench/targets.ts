/**
 * The speed targets of the project (issue 5), checked against one run's results: each target is a
 * ratio or a share measured in that run, reported as met, not met, or not measured (a model,
 * kernel or peer that was not run, or that failed).
 */
import { gemmFlops } from './flops';
import type { Outcome, Results } from './results';

export interface TargetCheck {
  target: string;
  /** The model or kernel case it was checked on. */
  subject: string;
  /** What was measured, as printed (e.g. "0.86×", "62%"); '—' when not measured. */
  measured: string;
  status: 'met' | 'not met' | 'not measured';
}

const seconds = (o: Outcome | null | undefined) => (o?.status === 'ok' ? o.medianSeconds : null);
const times = (x: number) => `${x.toPrecision(3)}×`;
const percent = (x: number) => `${Math.round(100 * x)}%`;

function check(target: string, subject: string, value: number | null, goal: number, show: (x: number) => string): TargetCheck {
  if (value == null || !Number.isFinite(value)) return { target, subject, measured: '—', status: 'not measured' };
  return { target, subject, measured: show(value), status: value >= goal ? 'met' : 'not met' };
}

/** Every target of issue 5 that this run's options could measure, in the order. */
export function targetChecks(res: Results): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const peak = res.peaks.at(-1);
  const model = (id: string, mode: 'infer' | 'train') => res.models.find((m) => m.model === id && m.mode === mode);
  const speedup = (id: string, mode: 'infer' | 'train') => {
    const m = model(id, mode), ours = seconds(m?.ours), peer = seconds(m?.peer?.outcome);
    return ours && peer ? peer / ours : null;
  };

  for (const [id, goal] of [['seed-cifar', 1.2], ['seed-stl10', 1.2], ['vit-b16-b8', 1.2], ['vit-b16-b1', 1.0]] as const)
    if (model(id, 'infer')) checks.push(check(`inference ≥ ${goal.toFixed(1)}× onnxruntime-node`, id, speedup(id, 'infer'), goal, times));
  for (const id of ['seed-cifar', 'seed-stl10']) {
    const m = model(id, 'train');
    if (!m) continue;
    checks.push(check('training step ≥ 4× PyTorch', id, speedup(id, 'train'), 4, times));
    const s = seconds(m.ours);
    checks.push(check('training step ≥ 50% of the FMA peak', id, s && peak ? m.flops / s / 1e9 / peak.gflops : null, 0.5, percent));
  }

  const gemm = res.kernels.gemm.filter((g) => g.isa === peak?.isa);
  for (const g of gemm.filter((c) => c.label.startsWith('square'))) {
    const ours = seconds(g.ours), blas = seconds(g.openblas);
    checks.push(check('GEMM ≥ 90% of OpenBLAS', g.label, ours && blas ? blas / ours : null, 0.9, percent));
  }
  for (const g of gemm.filter((c) => c.label.startsWith('seed-'))) {
    const s = seconds(g.ours);
    checks.push(check('GEMM ≥ 70% of the FMA peak', g.label, s && peak ? gemmFlops(g.M, g.N, g.K) / s / 1e9 / peak.gflops : null, 0.7, percent));
  }

  for (const a of res.kernels.attention.filter((r) => r.T === 4096 && r.isa === peak?.isa)) {
    const ran = seconds(a.forward) != null && seconds(a.backward) != null && a.savedBytes != null;
    checks.push({
      target: 'attention at T = 4096 trains with O(T) saved memory', subject: `T=${a.T}, ${a.B}×${a.H} heads`,
      measured: ran ? `saves ${(a.savedBytes! / 2 ** 20).toFixed(0)} MiB, not ${(a.naiveWeightsBytes / 2 ** 20).toFixed(0)} MiB` : '—',
      status: !ran ? 'not measured' : a.savedBytes! < a.naiveWeightsBytes / 4 ? 'met' : 'not met',
    });
  }

  for (const m of res.models.filter((r) => r.mode === 'train')) {
    const ours = m.ours.maxRssKb, peer = m.peer?.outcome.maxRssKb;
    checks.push(check('training peak RSS ≤ PyTorch’s', m.model, ours && peer ? peer / ours : null, 1,
      () => `${Math.round(ours! / 1024)} / ${Math.round(peer! / 1024)} MB`));
  }
  return checks;
}
