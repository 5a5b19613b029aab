/**
 * vitest's globalSetup: every temporary file of a test run goes under one folder of its own, removed
 * when the run ends. TMPDIR is set before the test workers start, so os.tmpdir() in the tests, in
 * the children they spawn (the CLI, MPI ranks, npm) and in the library itself returns that folder:
 * a run leaves nothing in the machine's /tmp, whatever a test forgets to remove.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export default function setup(): () => void {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-test-run-'));
  process.env.TMPDIR = root;
  return () => fs.rmSync(root, { recursive: true, force: true });
}
