/**
 * DistributedSampler: which dataset indices this rank reads in an epoch. Every rank draws the
 * same permutation (a seeded shuffle of 0..n-1, reshuffled by setEpoch), pads it by wrap-around to
 * a multiple of the world size (or drops the tail with dropLast), and takes every worldSize-th
 * index starting at its rank: the ranks' shares are disjoint, equally long, and together cover the
 * dataset once (plus the padding) — PyTorch's DistributedSampler.
 */
import * as distributed from './collectives';
import { invalidArg } from '../validation/errors';
import { OptionKeys } from '../validation/options';
import { mulberry32 } from '../core/random';

export interface DistributedSamplerOptions {
  /** Shuffle every epoch (default true). */
  shuffle?: boolean;
  /** The shuffle's seed, the same on every rank (default 0). */
  seed?: number;
  /** Drop the tail that does not divide evenly instead of padding by wrap-around (default false). */
  dropLast?: boolean;
  /** This process's rank (default distributed.rank()). */
  rank?: number;
  /** The number of ranks (default distributed.worldSize()). */
  worldSize?: number;
}
const OPTIONS = new OptionKeys<DistributedSamplerOptions>('DistributedSampler options',
  { shuffle: true, seed: true, dropLast: true, rank: true, worldSize: true });

export class DistributedSampler implements Iterable<number> {
  readonly datasetSize: number;
  readonly shuffle: boolean;
  readonly seed: number;
  readonly dropLast: boolean;
  readonly rank: number;
  readonly worldSize: number;
  private epoch = 0;

  constructor(datasetSize: number, options: DistributedSamplerOptions = {}) {
    if (!Number.isInteger(datasetSize) || datasetSize < 0) invalidArg('datasetSize', 'a non-negative integer', datasetSize);
    const o = OPTIONS.check('options', options);
    this.datasetSize = datasetSize;
    this.shuffle = o.shuffle ?? true;
    this.seed = o.seed ?? 0;
    this.dropLast = o.dropLast ?? false;
    this.worldSize = o.worldSize ?? distributed.worldSize();
    this.rank = o.rank ?? distributed.rank();
    if (typeof this.shuffle !== 'boolean') invalidArg('options.shuffle', 'a boolean', this.shuffle);
    if (typeof this.dropLast !== 'boolean') invalidArg('options.dropLast', 'a boolean', this.dropLast);
    if (!Number.isInteger(this.seed)) invalidArg('options.seed', 'an integer', this.seed);
    if (!Number.isInteger(this.worldSize) || this.worldSize < 1) invalidArg('options.worldSize', 'a positive integer', this.worldSize);
    if (!Number.isInteger(this.rank) || this.rank < 0 || this.rank >= this.worldSize)
      invalidArg('options.rank', `an integer in [0, ${this.worldSize})`, this.rank);

  }

  /** Indices per rank and epoch: ceil(n / worldSize), or floor with dropLast. */
  get numSamples(): number {
    return this.dropLast ? Math.floor(this.datasetSize / this.worldSize) : Math.ceil(this.datasetSize / this.worldSize);
  }

  /** Indices over all ranks per epoch (numSamples × worldSize). */
  get totalSize(): number {
    return this.numSamples * this.worldSize;
  }

  /** Selects the epoch whose shuffle indices() returns (call it with the same value on every rank). */
  setEpoch(epoch: number): void {
    if (!Number.isInteger(epoch) || epoch < 0) invalidArg('epoch', 'a non-negative integer', epoch);
    this.epoch = epoch;
  }

  /** This rank's indices for the current epoch, in reading order. */
  indices(): Int32Array {
    const n = this.datasetSize;
    const order = new Int32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    if (this.shuffle) {
      const rand = mulberry32((this.seed * 0x9e3779b1) ^ (this.epoch * 0x85ebca6b + 0x27d4eb2f));
      for (let i = n - 1; i > 0; i--) {
        const j = Math.floor(rand() * (i + 1));
        const t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
    }
    const out = new Int32Array(this.numSamples);
    if (n === 0) return out;
    for (let k = 0; k < out.length; k++) out[k] = order[(this.rank + k * this.worldSize) % n];
    return out;
  }

  [Symbol.iterator](): Iterator<number> {
    return this.indices()[Symbol.iterator]();
  }
}
