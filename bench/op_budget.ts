/**
 * Where a training step goes, op by op: each side's operator medians (op_rows.ts) times the number
 * of calls one step makes (op_cases.ts callsPerStep), summed per family, ours against PyTorch's,
 * beside the ratio of the model's measured training steps. The sums are set against each other,
 * not against the step time: on a shared machine the operators and the step are measured minutes
 * apart, under different load, while ours and PyTorch's operators are measured in turn. What the
 * operator table does not cover (patch or token embeddings, residual adds, the loss, a ViT's head,
 * framework overhead) is in the step ratio only.
 */
import type { OpFamily } from './cli';
import { callsPerStep, opCases } from './op_cases';
import { bestOf, seconds, type ModelResult, type OpRow, type Outcome } from './results';
import { MODELS } from './specs';

/** Seconds per training step in each family (null: one of its rows did not run). */
export type FamilySeconds = Partial<Record<OpFamily, number | null>>;

export interface BudgetRow {
  model: string;
  ours: FamilySeconds;
  torch: FamilySeconds;
  /** PyTorch's training step median ÷ ours (null when either did not run). */
  stepRatio: number | null;
}

/** Σ calls × median per family over one side's rows (`pick` chooses the side). */
function sums(rows: readonly OpRow[], calls: ReadonlyMap<string, number>, pick: (r: OpRow) => Outcome): FamilySeconds {
  const out: FamilySeconds = {};
  for (const r of rows) {
    const n = calls.get(`${r.family} ${r.label}`) ?? 0;
    if (!n) continue;
    const s = seconds(pick(r)), prev = out[r.family];
    out[r.family] = s == null || prev === null ? null : (prev ?? 0) + n * s;
  }
  return out;
}

/** One row for each model whose training step and operator rows this run has. */
export function stepBudget(models: readonly ModelResult[], ops: readonly OpRow[], families: readonly OpFamily[]): BudgetRow[] {
  const out: BudgetRow[] = [];
  for (const m of models.filter((r) => r.mode === 'train')) {
    const base = MODELS.find((s) => s.id === m.model);
    const rows = ops.filter((r) => r.model === m.model && !r.derived);
    if (!base || !rows.length) continue;
    const spec = { ...base, batch: m.batch };
    const calls = new Map(opCases(spec, families).map((c) => [`${c.op} ${'label' in c ? c.label : ''}`, callsPerStep(spec, c)]));
    const ours = seconds(m.ours), theirs = seconds(bestOf(m.peers, 'PyTorch')?.outcome);
    out.push({ model: m.model, ours: sums(rows, calls, (r) => r.ours), torch: sums(rows, calls, (r) => r.torch),
      stepRatio: ours && theirs ? theirs / ours : null });
  }
  return out;
}

/** Σ of the families (null when one of them did not run). */
export function total(f: FamilySeconds): number | null {
  const parts = Object.values(f);
  return parts.some((x) => x === null) ? null : parts.reduce<number>((a, b) => a + (b ?? 0), 0);
}
