/**
 * Run under `mpirun -np N` by test/distributed.test.ts: every collective on values whose result
 * has a closed form, printed as one JSON line per rank for the test to check.
 */
import { distributed, Tensor } from '../../lib';

async function main(): Promise<void> {
  await distributed.init();
  const r = distributed.rank(), n = distributed.worldSize();
  const out: Record<string, unknown> = { rank: r, size: n, initialized: distributed.isInitialized() };
  // sum: rank r holds [r+1, 2(r+1), ...] → i·n(n+1)/2; mean: that / n; max: i·n
  const mk = () => Tensor.from(Float32Array.from({ length: 5 }, (_, i) => (r + 1) * (i + 1)), [5]);
  out.sum = Array.from((await distributed.allReduce(mk(), 'sum')).data);
  out.mean = Array.from((await distributed.allReduce(mk(), 'mean')).data);
  out.max = Array.from((await distributed.allReduce(mk(), 'max')).data);
  out.isum = Array.from((await distributed.allReduce(Tensor.from(Int32Array.of(r, 1), [2]), 'sum')).data);
  // a large buffer (several MB) to exercise the bandwidth path
  const big = Tensor.from(new Float32Array(1 << 20).fill(r + 1), [1 << 20]);
  await distributed.allReduce(big, 'sum');
  out.big = [big.data[0], big.data[(1 << 20) - 1]];
  const b = Tensor.from(Float32Array.of(r * 10, r * 10 + 1), [2]);
  out.bcast = Array.from((await distributed.broadcast(b, n - 1)).data);
  const g = await distributed.allGather(Tensor.from(Float32Array.of(r, -r), [2]));
  out.gatherShape = g.shape;
  out.gather = Array.from(g.data);
  // collectives started together settle in order, and the event loop stays free meanwhile
  const many = await Promise.all([1, 2, 3].map((k) => distributed.allReduce(Tensor.from(Float32Array.of(k), [1]), 'sum')));
  out.many = many.map((t) => t.data[0]);
  await distributed.barrier();
  await distributed.finalize();
  out.finalized = !distributed.isInitialized();
  console.log(JSON.stringify(out));
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
