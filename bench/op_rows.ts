/**
 * The operator table's rows from the pooled timed runs of one model's cases (op_cases.ts): one row
 * per pass, with its FLOPs when it is matrix products. Where our op is fused (the attention core
 * inside the attention layer, the activation inside the feed-forward op) its row is derived: the
 * median of the paired differences between the layer and its own Linears, timed in turn, set
 * against PyTorch's separate op (F.scaled_dot_product_attention, the activation).
 */
import { attentionLayerFlops, gemmFlops } from './flops';
import type { CaseSamples, OpCase } from './op_cases';
import { missing, type Outcome, type OpRow } from './results';
import { median } from './sampling';

export function samplesOutcome(samples: number[] | undefined, why: string): Outcome {
  return samples?.length ? { status: 'ok', samples, medianSeconds: median(samples), maxRssKb: null } : missing('failed', why);
}

/**
 * A fused op's part: the median of the paired differences layer − its Linears (op_measure.ts times
 * them in pairs); ≤ 0 when the part is within the noise.
 */
function difference(layer: Outcome, linears: Outcome): Outcome {
  if (layer.status !== 'ok') return layer;
  if (linears.status !== 'ok') return linears;
  if (layer.samples.length !== linears.samples.length) return missing('failed', 'unpaired samples');
  const diffs = layer.samples.map((s, i) => s - linears.samples[i]);
  return { status: 'ok', samples: diffs, medianSeconds: median(diffs), maxRssKb: null };
}

const dims = (...parts: (string | false)[]) => parts.filter(Boolean).join(' ');

/**
 * The rows of one case; `ours` and `torch` are the pooled samples of each pass (empty when a side
 * did not run), `torchVariant` which of PyTorch's variants each pass of `torch` comes from.
 */
export function opRows(model: string, c: OpCase, ours: CaseSamples, torch: CaseSamples, whyOurs: string, whyTorch: string,
  torchVariant: Record<string, string> = {}): OpRow[] {
  const o = (pass: string) => samplesOutcome(ours[pass], whyOurs);
  const t = (pass: string) => ({ torch: samplesOutcome(torch[pass], whyTorch), ...(torchVariant[pass] ? { torchVariant: torchVariant[pass] } : {}) });
  const id = { model, family: c.op, label: 'label' in c ? c.label : '' };
  const row = (op: string, pass: string, shape: string, flops: number | null, key = pass): OpRow =>
    ({ ...id, op, pass, shape, flops, ours: o(key), ...t(key) });
  switch (c.op) {
    case 'linear': {
      const { rows: M, inFeatures: K, outFeatures: N, label } = c, f = gemmFlops(M, N, K);
      return [row(`GEMM ${label}`, 'forward x·Wᵀ', `${M}×${N}×${K}`, f, 'forward'),
        row(`GEMM ${label}`, 'backward dX = dy·W', `${M}×${K}×${N}`, f, 'dX'),
        row(`GEMM ${label}`, 'backward dW = dyᵀ·x', `${N}×${K}×${M}`, f, 'dW')];
    }
    case 'attention': {
      const { B, Tq, Tk, D, H } = c, f = attentionLayerFlops(B, Tq, Tk, D, c.cross);
      const shape = dims(`B${B} H${H} T${Tq}`, Tk !== Tq || c.cross ? `Tk${Tk}` : false, `Dh${D / H}`, c.causal && 'causal');
      const core = 4 * B * Tq * Tk * D;
      return [row(`attention layer, ${c.label}`, 'forward', shape, f), row(`attention layer, ${c.label}`, 'backward', shape, 2 * f),
        { ...id, op: `attention core (SDPA), ${c.label}`, pass: 'forward', shape, flops: core, ours: difference(o('forward'), o('linearsForward')),
          ...t('coreForward'), derived: 'attention layer − its projections' },
        { ...id, op: `attention core (SDPA), ${c.label}`, pass: 'backward', shape, flops: 2 * core, ours: difference(o('backward'), o('linearsBackward')),
          ...t('coreBackward'), derived: 'attention layer − its projections' }];
    }
    case 'feedforward': {
      const { rows, D, F } = c, f = 4 * rows * D * F, act = c.activation === 'gelu' ? 'GELU' : 'ReLU', shape = `${rows}×${D}→${F}`;
      return [row(`feed-forward (fc1, ${act}, fc2)`, 'forward', shape, f), row(`feed-forward (fc1, ${act}, fc2)`, 'backward', shape, 2 * f),
        { ...id, op: act, pass: 'forward', shape: `${rows}×${F}`, flops: null, ours: difference(o('forward'), o('linearsForward')),
          ...t('coreForward'), derived: 'feed-forward − its two Linears' },
        { ...id, op: act, pass: 'backward', shape: `${rows}×${F}`, flops: null, ours: difference(o('backward'), o('linearsBackward')),
          ...t('coreBackward'), derived: 'feed-forward − its two Linears' }];
    }
    case 'layernorm':
      return [row('LayerNorm', 'forward', `${c.rows}×${c.D}`, null), row('LayerNorm', 'backward', `${c.rows}×${c.D}`, null)];
    case 'adamw': {
      const n = c.sizes.reduce((a, b) => a + b, 0);
      return [row('AdamW', 'step', `${(n / 1e6).toFixed(n < 1e6 ? 3 : 1)}M params, ${c.sizes.length} tensors`, null)];
    }
  }
}
