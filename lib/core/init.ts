/**
 * PyTorch's default initialisations, drawn from our seeded Random (same seed, same weights; the
 * values differ from torch's generator, the distributions are the same).
 */
import { Random } from './random';

/** nn.Linear / nn.Conv2d: kaiming_uniform(a=√5) weights and biases, both U(−1/√fanIn, 1/√fanIn). */
export function uniformFanIn(rng: Random, n: number, fanIn: number): Float32Array {
  const bound = 1 / Math.sqrt(fanIn);
  return rng.uniformArray(n, -bound, bound);
}

/** Constant fill (LayerNorm: weight 1, bias 0). */
export function constant(n: number, value: number): Float32Array {
  return new Float32Array(n).fill(value);
}
