/**
 * Where a training step goes: each side's operator medians (op_rows.ts) times the number of calls
 * one step makes (op_cases.ts callsPerStep), summed per family, against the step time measured
 * for the model; the rest is what the operator table does not cover (patch embedding or token
 * embeddings, residual adds, the loss, the classifier head of a ViT, framework overhead) plus the
 * difference between ops timed alone and inside a step. The operator rows must be the model's own
 * (same batch).
 */
import type { OpFamily } from './cli';
import { callsPerStep, opCases } from './op_cases';
import { bestOf, type ModelResult, type OpRow, type Outcome } from './results';
import { MODELS } from './specs';

export interface BudgetRow {
  model: string;
  side: 'ours' | 'PyTorch';
  /** Seconds per step in each family (null: a row of it did not run). */
  families: Partial<Record<OpFamily, number | null>>;
  /** The measured training step (null when it did not run). */
  step: number | null;
}

const seconds = (o: Outcome) => (o.status === 'ok' ? o.medianSeconds : null);

/** One row per side for each model whose training step and operator rows this run has. */
export function stepBudget(models: readonly ModelResult[], ops: readonly OpRow[], families: readonly OpFamily[]): BudgetRow[] {
  const out: BudgetRow[] = [];
  for (const m of models.filter((r) => r.mode === 'train')) {
    const base = MODELS.find((s) => s.id === m.model);
    const rows = ops.filter((r) => r.model === m.model && !r.derived);
    if (!base || !rows.length) continue;
    const spec = { ...base, batch: m.batch };
    const calls = new Map(opCases(spec, families).map((c) => [`${c.op} ${'label' in c ? c.label : ''}`, callsPerStep(spec, c)]));
    for (const side of ['ours', 'PyTorch'] as const) {
      const sums: Partial<Record<OpFamily, number | null>> = {};
      for (const r of rows) {
        const n = calls.get(`${r.family} ${r.label}`) ?? 0;
        if (!n) continue;
        const s = seconds(side === 'ours' ? r.ours : r.torch), prev = sums[r.family];
        sums[r.family] = s == null || prev === null ? null : (prev ?? 0) + n * s;
      }
      const step = side === 'ours' ? m.ours : bestOf(m.peers, 'PyTorch')?.outcome;
      out.push({ model: m.model, side, families: sums, step: step ? seconds(step) : null });
    }
  }
  return out;
}
