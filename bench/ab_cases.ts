/**
 * The cases `bench/ab.ts` times, as written on its command line:
 *   gemm:MxNxK[:flags]        native.gemm, C[M,N] = op(A) op(B) over K; flags: A (transA), B (transB),
 *                             g (the GELU epilogue)
 *   linear:MxNxK[:g]          native.linearForward as a layer runs it, y[M,N] = x[M,K] Wᵀ + b (g: then
 *                             GELU), W prepacked by packWeights for the precision; the one case that
 *                             takes int8 (dynamic quantization: eval-only Linear layers, not raw ops)
 *   attention:BxTxDxH[:flags] native.attentionForward (flag f, the default) or attentionBackward (b):
 *                             self-attention of B sequences of T tokens, width D, H heads; c: causal
 * each optionally @precision (fp32 without it): fp32, tf32 or bf16 (and int8 for linear).
 */
import { Precisions, type Activation, type Precision } from '../lib/native/ops.generated';

/** The precisions a gemm or attention case may name: the project's but int8 (linear cases take every one). */
const CASE_PRECISIONS = Precisions.filter((p) => p !== 'int8');

export type AbCase =
  | { kind: 'gemm'; M: number; N: number; K: number; transA: boolean; transB: boolean; act: Activation; precision: Precision }
  | { kind: 'linear'; M: number; N: number; K: number; act: Activation; precision: Precision }
  | { kind: 'attention'; B: number; T: number; D: number; H: number; pass: 'forward' | 'backward'; causal: boolean; precision: Precision };

export const CASE_SYNTAX = `gemm:MxNxK[:AB g], linear:MxNxK[:g] or attention:BxTxDxH[:f|b c], optionally @precision (${CASE_PRECISIONS.join(', ')}; linear also int8)`;

/** Per kind of case: its dimensions and the flags it takes. */
const DIMENSIONS: Record<string, number> = { gemm: 3, linear: 3, attention: 4 };
const FLAGS: Record<string, string> = { gemm: 'ABg', linear: 'g', attention: 'fbc' };

/** The case `text` names (see the header), or an Error saying what is wrong with it. */
export function parseCase(text: string): AbCase {
  const [body, precision = 'fp32'] = text.split('@');
  const [kind, dims = '', flags = ''] = body.split(':');
  const n = dims.split('x').map(Number);
  const fail = (why: string) => new Error(`case '${text}': ${why} (expected ${CASE_SYNTAX})`);
  const precisions: readonly string[] = kind === 'linear' ? Precisions : CASE_PRECISIONS;
  if (!precisions.includes(precision))
    throw fail(Precisions.includes(precision as Precision) ? `precision '${precision}' is for linear cases only` : `unknown precision '${precision}'`);
  if (n.some((v) => !Number.isInteger(v) || v < 1)) throw fail('dimensions must be positive integers');
  const unknown = [...flags].find((f) => !(FLAGS[kind] ?? '').includes(f));
  if (unknown) throw fail(`unknown flag '${unknown}'`);
  const p = precision as Precision;
  if (kind === 'gemm' && n.length === 3)
    return { kind, M: n[0], N: n[1], K: n[2], transA: flags.includes('A'), transB: flags.includes('B'), act: flags.includes('g') ? 'gelu' : 'none', precision: p };
  if (kind === 'linear' && n.length === 3)
    return { kind, M: n[0], N: n[1], K: n[2], act: flags.includes('g') ? 'gelu' : 'none', precision: p };
  if (kind === 'attention' && n.length === 4) {
    if (n[2] % n[3] !== 0) throw fail('D must be a multiple of H');
    if (flags.includes('f') && flags.includes('b')) throw fail('f and b both given');
    return { kind, B: n[0], T: n[1], D: n[2], H: n[3], pass: flags.includes('b') ? 'backward' : 'forward', causal: flags.includes('c'), precision: p };
  }
  const count = DIMENSIONS[kind];
  throw fail(count ? `${kind} takes ${count} dimensions` : `unknown kind '${kind}'`);
}

/** The case's FLOPs a run (the product's 2MNK), or null where ab.ts reports milliseconds only. */
export function caseFlops(c: AbCase): number | null {
  return c.kind === 'attention' ? null : 2 * c.M * c.N * c.K;
}
