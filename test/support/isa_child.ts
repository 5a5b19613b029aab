/**
 * Child process of test/selfcheck.test.ts (bundled, run with NF_ADDON_PATH and the environment
 * under test): loads the library, then loads it again in a worker thread, and prints as JSON what
 * each saw: isaInfo, the warnings emitted, and what setIsa says to each variant.
 */
import { isMainThread, parentPort, Worker } from 'node:worker_threads';

import { native } from '../../lib/native/addon';

const warnings: string[] = [];
process.on('warning', (w) => warnings.push(`${(w as NodeJS.ErrnoException).code}: ${w.message}`));

/** What this thread saw. */
export interface IsaReport {
  info: ReturnType<typeof native.isaInfo>;
  warnings: string[];
  /** 'ok', or the message setIsa threw. */
  setIsa: Record<string, string>;
}

function report(): IsaReport {
  const info = native.isaInfo();
  const setIsa: Record<string, string> = {};
  for (const isa of info.compiled) {
    try {
      native.setIsa(isa);
      setIsa[isa] = 'ok';
    } catch (e) {
      setIsa[isa] = (e as Error).message;
    }
  }
  native.setIsa(info.active);
  return { info, warnings, setIsa };
}

// setImmediate: process.emitWarning emits on the next tick.
if (isMainThread) {
  setImmediate(() => {
    const main = report();
    const worker = new Worker(__filename);
    worker.once('message', (inWorker: IsaReport) => console.log(JSON.stringify({ main, worker: inWorker })));
  });
} else {
  setImmediate(() => parentPort!.postMessage(report()));
}
