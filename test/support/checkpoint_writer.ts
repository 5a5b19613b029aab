/**
 * Writes one large checkpoint (64 MiB of weights) to the path given, for the interrupted-write
 * test in test/checkpoint.test.ts, which kills this process while the file is being written.
 *   node checkpoint_writer.js <path>
 */
import { Linear, saveCheckpoint } from '../../lib';

const model = new Linear({ inFeatures: 4096, outFeatures: 4096, seed: 5 });
saveCheckpoint(process.argv[2], { model, step: 999 });
