import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Native code runs in child processes, so a crash fails one file instead of the runner.
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
