/**
 * Histograms as torch.utils.tensorboard writes them (add_histogram with bins='tensorflow'):
 * TensorFlow's default bucket edges, ±1e-12 growing by ×1.1 up to 1e20 with 0 in the middle,
 * counts as numpy.histogram makes them (each bin [left, right), the last one closed), then only
 * the span of non-empty buckets kept plus one empty bucket on the left, as make_histogram does.
 */

/** A TensorBoard HistogramProto's fields. */
export interface Histogram {
  min: number;
  max: number;
  num: number;
  sum: number;
  sumSquares: number;
  /** The right edge of each bucket. */
  bucketLimit: number[];
  /** The count of each bucket. */
  bucket: number[];
}

/** TensorFlow's default edges (torch SummaryWriter.default_bins), computed as Python does, in doubles. */
export const DEFAULT_BINS: readonly number[] = (() => {
  const pos: number[] = [];
  for (let v = 1e-12; v < 1e20; v *= 1.1) pos.push(v);
  return [...pos.map((v) => -v).reverse(), 0, ...pos];
})();

/** The index of the bin of `x` among `edges` (numpy.histogram's rule), or -1 when outside them. */
function binOf(x: number, edges: readonly number[]): number {
  const last = edges.length - 1;
  if (!(x >= edges[0] && x <= edges[last])) return -1;
  if (x === edges[last]) return last - 1;
  let lo = 0, hi = last; // edges[lo] <= x < edges[hi]
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (edges[mid] <= x) lo = mid;
    else hi = mid;
  }
  return lo;
}

/**
 * The histogram of `values` (finite, at least one, each within ±1e20) over `edges` (default
 * DEFAULT_BINS), trimmed as torch.utils.tensorboard.summary.make_histogram trims it.
 */
export function makeHistogram(values: ArrayLike<number>, edges: readonly number[] = DEFAULT_BINS): Histogram {
  const counts = new Float64Array(edges.length - 1);
  let min = Infinity, max = -Infinity, sum = 0, sumSquares = 0;
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    const b = binOf(x, edges);
    if (b >= 0) counts[b]++;
    if (x < min) min = x;
    if (x > max) max = x;
    sum += x;
    sumSquares += x * x;
  }
  let first = -1, last = -1;
  for (let b = 0; b < counts.length; b++) if (counts[b] > 0) (first < 0 ? (first = b) : 0), (last = b);
  // The left edge of the first non-empty bucket is kept as the right edge of an empty one before it.
  const bucket = first > 0 ? Array.from(counts.subarray(first - 1, last + 1)) : [0, ...counts.subarray(0, last + 1)];
  const bucketLimit = edges.slice(Math.max(first, 0), last + 2);
  return { min, max, num: values.length, sum, sumSquares, bucketLimit, bucket };
}
