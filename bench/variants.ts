/**
 * How each peer's worker threads wait between parallel regions, measured both ways. PyTorch's
 * OpenMP threads spin before they sleep, and onnxruntime's intra-op threads spin too: on an idle
 * machine that saves a wake-up per region, but on a shared one, where another process holds a
 * core, a spinning thread keeps its core while the thread it waits for cannot run, and a region
 * can stall for a whole scheduler slice (16 ms per torch.mm call on this project's shared 2-core
 * machine, against 0.5 ms). So every peer measurement runs in each variant, and the faster one
 * (by median, after pooling the rounds) stands for the peer: the peer at its best on this
 * machine, whichever way it is loaded. Ours gets the same rule: our pool's threads sleep at once
 * by default, and spin 100 µs first with native.setThreadSpin(100) (NF_THREAD_SPIN_US).
 */
export interface OursVariant {
  label: string;
  /** native.setThreadSpin's microseconds. */
  spinUs: number;
}

export const OURS_VARIANTS: readonly OursVariant[] = [
  { label: 'threads sleep', spinUs: 0 },  // our default
  { label: 'threads spin 100 µs', spinUs: 100 },
];

export interface TorchVariant {
  label: string;
  /** Environment of the PyTorch process, over ours with these removed first. */
  env: Record<string, string>;
}

const WAIT_KNOBS = ['OMP_WAIT_POLICY', 'GOMP_SPINCOUNT', 'KMP_BLOCKTIME'];

export const TORCH_VARIANTS: readonly TorchVariant[] = [
  { label: 'OpenMP default', env: {} },
  { label: 'OMP_WAIT_POLICY=PASSIVE', env: { OMP_WAIT_POLICY: 'PASSIVE' } },
];

/** The environment of one PyTorch variant, over `base` (the wait knobs of `base` do not leak in). */
export function torchEnv(base: NodeJS.ProcessEnv, v: TorchVariant): NodeJS.ProcessEnv {
  const env = { ...base };
  for (const k of WAIT_KNOBS) delete env[k];
  return { ...env, ...v.env };
}

export interface OrtVariant {
  label: string;
  /** onnxruntime's session.intra_op.allow_spinning. */
  spinning: boolean;
}

export const ORT_VARIANTS: readonly OrtVariant[] = [
  { label: 'spinning', spinning: true },  // onnxruntime's default
  { label: 'no spinning', spinning: false },
];
