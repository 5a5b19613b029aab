/**
 * Child process of test/scratch_failure.test.ts (bundled, run with NF_TEST_SCRATCH_FAIL=1 and two
 * threads): every per-thread scratch buffer requested inside a parallel region fails to allocate,
 * as memory running out would make it. Runs ops whose pool threads need such buffers and prints,
 * as JSON, what each call did: threw (its message) or returned a result equal to the
 * single-threaded one (which allocates nothing inside a region).
 */
import { native } from '../../lib/native/addon';
import { mulberry32 } from '../../lib/core/random';

const rand = mulberry32(11);
const randoms = (n: number) => Float32Array.from({ length: n }, () => rand() - 0.5);

type Outcome = { threw: string | null; exact: boolean };
/**
 * Runs `call` `times` times on 2 threads, then once single-threaded for the reference (after, so that
 * the calling thread's buffers it allocates outside any region are not there for the 2-thread calls).
 */
function outcomes(times: number, call: () => Float32Array): Outcome[] {
  native.setNumThreads(2);
  const runs: (Float32Array | string)[] = [];
  for (let i = 0; i < times; i++) {
    try {
      runs.push(call().slice());
    } catch (e) {
      runs.push(`${(e as { code?: string }).code}: ${(e as Error).message}`);
    }
  }
  native.setNumThreads(1);
  const want = call();
  return runs.map((r) => (typeof r === 'string' ? { threw: r, exact: false } : { threw: null, exact: r.every((v, j) => Object.is(v, want[j])) }));
}

// The gemm op reserves the calling thread's packing buffer before its region (outside it, so that
// succeeds); the pool thread's own fails inside it whenever that thread joins the region.
const M = 1200, N = 1000, K = 300;
const A = randoms(M * K), B = randoms(K * N), C = new Float32Array(M * N);
const gemm = outcomes(20, () => (native.gemm({ M, N, K, A, B, C }), C));

// The attention core's tiles: the calling thread's are reserved before the region, a pool thread's
// fail in it (its projections find the calling thread's packing buffer large enough already).
const [Bt, T, D, H] = [16, 65, 64, 4];
const ax = randoms(Bt * T * D), qkvWeight = randoms(3 * D * D), projWeight = randoms(D * D);
const out = new Float32Array(Bt * T * D), qkv = new Float32Array(Bt * T * 3 * D), ctx = new Float32Array(Bt * T * D);
const lse = new Float32Array(Bt * H * T);
const attention = outcomes(20, () => (native.attentionForward({ B: Bt, Tq: T, D, H, x: ax, qkvWeight, projWeight, out, qkv, ctx, lse }), out));

// linearForward's product asks for the calling thread's buffer inside the region when it is not
// yet as large as it needs (here larger than any above).
const rows = 3000, inF = 512, outF = 700;
const x = randoms(rows * inF), W = randoms(outF * inF), b = randoms(outF), y = new Float32Array(rows * outF);
const linear = outcomes(3, () => (native.linearForward({ rows, inFeatures: inF, outFeatures: outF, x, W, b, y }), y));

process.stdout.write(JSON.stringify({ gemm, linear, attention }));
