/**
 * Resizes the kernel thread pool and runs a threaded GEMM right after, then a short threaded op (a
 * region over before a sleeping worker has woken, which the worker must then stay out of), many
 * times (run as a child process by test/threadpool.test.ts, so a deadlock fails by timeout instead
 * of hanging the suite). Usage: node resize_loop.js <iterations> (NF_THREAD_SPIN_US: the pool's
 * spin, printed back; `counts`: how many of the short op's elements hold the expected count).
 */
import { native } from '../../lib';

const iterations = Number(process.argv[2]);
const M = 96, N = 64, K = 32;
const A = new Float32Array(M * K).fill(0.5), B = new Float32Array(K * N).fill(2), C = new Float32Array(M * N);
const n = 40_000, ones = new Float32Array(n).fill(1), y = new Float32Array(n);
for (let i = 0; i < iterations; i++) {
  native.setNumThreads(1 + (i % 2));
  native.gemm({ M, N, K, A, B, C });
  native.accumulate({ n, y, x: ones });
  native.accumulate({ n, y, x: ones });
}
const counts = y.filter((v) => v === 2 * iterations).length;
console.log(JSON.stringify({ iterations, c: C[0], spin: native.threadSpin(), counts }));
