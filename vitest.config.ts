import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Temporary files go under one folder per run, removed at its end (test/support/temp_root.ts).
    globalSetup: ['./test/support/temp_root.ts'],
    // The default summary, then which CPU kernel variants the run exercised (test/support/isa_summary.ts).
    reporters: ['default', './test/support/isa_summary.ts'],
    // Native code runs in child processes, so a crash fails one file instead of the runner.
    pool: 'forks',
    // One file at a time: the leak, event-loop and packaging tests measure the process they run
    // in, and a neighbour compiling the CUDA emulator skews RSS and latency on a 2-core machine.
    fileParallelism: false,
    testTimeout: 120_000,
    // Uninitialized tensors (Tensor.empty, every op output) start as NaN, so an op that leaves
    // part of its output unwritten fails the tests instead of passing on a lucky zero.
    env: { NF_POISON_UNINITIALIZED: '1' },
    hookTimeout: 120_000,
  },
});
