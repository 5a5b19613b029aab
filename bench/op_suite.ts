/**
 * The operator table: for each requested model, its cases (op_cases.ts) measured by our worker
 * (op_measure.ts, the raw ops of lib/native) and by PyTorch (scripts/torch_ops_bench.py, in each
 * of its variants, variants.ts), alternating over --rounds with each pass's timed runs pooled; per
 * pass the faster PyTorch variant stands for PyTorch; then turned into rows (op_rows.ts).
 * Each pass gets a quarter of the model budget (--budget), at most 2 s.
 */
import { eventsOf, failureReason, lastEvent, runWorker, type ChildResult } from './child';
import type { Options } from './cli';
import type { SuiteContext } from './model_suite';
import { opCases, type CaseSamples, type OpCase } from './op_cases';
import { opRows } from './op_rows';
import { runScript } from './peers';
import type { Repeat } from './protocol';
import type { OpRow } from './results';
import { median } from './sampling';
import type { ModelSpec } from './specs';
import { TORCH_VARIANTS, type TorchVariant } from './variants';

function opRepeat(o: Options): Repeat {
  return { warmup: o.warmup, reps: o.reps, budget: Math.min(2, o.budget / 4) };
}

/** The limit of one process measuring `n` cases one after the other (--timeout per two cases). */
function suiteTimeout(o: Options, n: number): number {
  return o.timeout * Math.max(1, n / 2);
}

/** Appends each case's samples of one run to `into` (pass by pass). */
function collect(r: ChildResult, into: CaseSamples[]): void {
  for (const e of eventsOf(r, 'case')) {
    const passes = e.passes as CaseSamples, target = into[Number(e.index)];
    for (const [pass, samples] of Object.entries(passes)) (target[pass] ??= []).push(...samples);
  }
}

function torchRun(cases: OpCase[], variant: TorchVariant, ctx: SuiteContext): Promise<ChildResult> {
  const o = ctx.opts, r = opRepeat(o);
  return runScript('torch_ops_bench.py', ['--cases', JSON.stringify(cases), '--threads', String(o.threads), '--warmup', String(r.warmup),
    '--reps', String(r.reps), '--budget', String(r.budget)], o.threads, { timeoutS: suiteTimeout(o, cases.length), variant });
}

/** Per pass, the samples of the variant with the lower median, and which variant that is. */
function faster(byVariant: CaseSamples[]): { samples: CaseSamples; variant: Record<string, string> } {
  const samples: CaseSamples = {}, variant: Record<string, string> = {};
  byVariant.forEach((s, i) => {
    for (const [pass, xs] of Object.entries(s))
      if (xs.length && (!samples[pass] || median(xs) < median(samples[pass]))) {
        samples[pass] = xs;
        variant[pass] = TORCH_VARIANTS[i].label;
      }
  });
  return { samples, variant };
}

/** The operator rows of one model (none when no family was requested). */
export async function runOps(spec: ModelSpec, ctx: SuiteContext): Promise<OpRow[]> {
  const o = ctx.opts, cases = opCases(spec, o.ops);
  if (!cases.length) return [];
  const torchOn = o.peers.includes('torch');
  const ours = cases.map((): CaseSamples => ({}));
  const torch = TORCH_VARIANTS.map(() => cases.map((): CaseSamples => ({})));  // [variant][case]
  let whyOurs = 'no timed run', whyTorch = torchOn ? ctx.python.reason ?? 'no timed run' : 'not requested';
  for (let round = 0; round < o.rounds; round++) {
    const mine = await runWorker({ task: 'ops', threads: o.threads, cases, repeat: opRepeat(o) }, { timeoutS: suiteTimeout(o, cases.length) });
    collect(mine, ours);
    if (!lastEvent(mine, 'result')) whyOurs = failureReason(mine);
    if (torchOn && ctx.python.torch) {
      for (const [v, variant] of TORCH_VARIANTS.entries()) {
        const theirs = await torchRun(cases, variant, ctx);
        collect(theirs, torch[v]);
        if (!lastEvent(theirs, 'result')) whyTorch = `${variant.label}: ${failureReason(theirs)}`;
      }
    }
    ctx.log(`[${spec.id} b${spec.batch} ops] round ${round + 1}/${o.rounds}: ${cases.length} cases`);
  }
  return cases.flatMap((c, i) => {
    const best = faster(torch.map((byCase) => byCase[i]));
    return opRows(spec.id, c, ours[i], best.samples, whyOurs, whyTorch, best.variant);
  });
}
