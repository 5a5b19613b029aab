/**
 * Sequence-to-sequence example: a Transformer learns to rewrite dates written the ways people
 * write them ("april 5, 2023", "5 apr 2023", "05.04.2023", "2023/4/5") as ISO 8601
 * ("2023-04-05"), character by character, and is scored by exact match of greedy decoding on
 * dates it never saw in training.
 *
 *   npm run example:seq2seq -- [--steps N] [--batch-size N] [--seed N] [--threads N]
 */
import { parseArgs } from 'node:util';

import { native } from '../lib/index';
import { DEFAULTS, trainSeq2seq } from './seq2seq/train';

const HELP = `Usage: npm run example:seq2seq -- [options]

Trains a Transformer to convert dates to ISO 8601 and reports exact-match accuracy on held-out dates.

Options:
  --steps N        optimizer steps (default ${DEFAULTS.steps})
  --batch-size N   sequences per step (default ${DEFAULTS.batchSize})
  --seed N         data and initialisation seed (default ${DEFAULTS.seed})
  --threads N      kernel threads (default: one per core)
  -h, --help       this text`;

function positiveInt(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`Expected a positive integer for --${flag} but received ${JSON.stringify(value)}`);
  return n;
}

/** The exact-match accuracy the defaults reach on every CPU kernel variant (README). */
const TARGET_ACCURACY = 0.99;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: {
    steps: { type: 'string' }, 'batch-size': { type: 'string' }, seed: { type: 'string' }, threads: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  } });
  if (values.help) return console.log(HELP);
  if (values.threads !== undefined) native.setNumThreads(positiveInt('threads', values.threads, 0));
  const options = { steps: positiveInt('steps', values.steps, DEFAULTS.steps),
    batchSize: positiveInt('batch-size', values['batch-size'], DEFAULTS.batchSize), seed: positiveInt('seed', values.seed, DEFAULTS.seed) };
  const o = { ...DEFAULTS, ...options };
  console.log(`Transformer ${o.depth}+${o.depth} blocks, dModel ${o.dModel}, ${o.numHeads} heads; ${o.steps} steps of ${o.batchSize} ` +
    `dates; ${native.numThreads()} threads`);
  const { accuracy, predictions, trainSeconds, bestStep } = await trainSeq2seq(options, (p) => console.log(
    `step ${String(p.step).padStart(5)}  loss ${p.loss.toFixed(3)}  valid exact ${(100 * p.validAccuracy).toFixed(1).padStart(5)}%  ` +
    `lr ${p.lr.toExponential(2)}  ${p.seconds.toFixed(0)} s`));
  const wrong = predictions.filter((p) => p.got !== p.want);
  console.log('\nHeld-out examples (input → output):');
  for (const p of [...predictions.slice(0, 6), ...wrong.slice(0, 4)])
    console.log(`  ${p.src.padEnd(20)} → ${p.got}${p.got === p.want ? '' : `   ✗ (want ${p.want})`}`);
  console.log(`\nexact-match accuracy on ${predictions.length} held-out dates: ${(100 * accuracy).toFixed(1)}% ` +
    `(${predictions.length - wrong.length}/${predictions.length}) with the weights of step ${bestStep} (best validation exact match), ` +
    `trained in ${trainSeconds.toFixed(0)} s`);
  // The stated target (README): ≥ 99% with the defaults. The CPU kernel variants differ in the last
  // bits of fp32 sums, which training carries into slightly different models (999 or 1000 of 1000).
  const defaults = o.steps === DEFAULTS.steps && o.batchSize === DEFAULTS.batchSize && o.seed === DEFAULTS.seed;
  if (defaults && accuracy < TARGET_ACCURACY) {
    console.error(`below the target of ${100 * TARGET_ACCURACY}% exact match`);
    process.exitCode = 1;
  }
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exitCode = 1;
});
