/**
 * Atomic file replacement: the bytes go to a temporary file in the target's folder, are flushed
 * to disk (fsync), and the temporary file is renamed over the target, then the folder is
 * flushed. A crash or kill at any point leaves either the previous file or the new one, never a
 * mix; a failed write removes the temporary file and leaves the target untouched.
 */
import * as fs from 'node:fs';
import * as nodePath from 'node:path';

import { invalidArg, NodeformerError } from '../validation/errors';

let counter = 0;

function tempName(path: string): string {
  return `${path}.tmp-${process.pid}-${Date.now()}-${counter++}`;
}

function writeError(path: string, e: unknown): NodeformerError {
  return new NodeformerError('ERR_NF_INVALID_ARG', `Cannot write path ${JSON.stringify(path)}: ${(e as Error).message}`);
}

function checkPath(path: unknown): asserts path is string {
  if (typeof path !== 'string' || path.length === 0) invalidArg('path', 'a file path string', path);
}

/** Flushes a folder's entries (the rename) to disk where the platform allows it. */
function syncFolder(dir: string): void {
  let fd: number | null = null;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // Folders cannot be opened or flushed on every platform (Windows); the rename is still atomic.
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

/** Replaces `path` with `bytes` atomically (see the file comment). */
export function writeFileAtomic(path: string, bytes: Uint8Array): void {
  checkPath(path);
  const tmp = tempName(path);
  try {
    const fd = fs.openSync(tmp, 'w', 0o644);
    try {
      for (let off = 0; off < bytes.length;) off += fs.writeSync(fd, bytes, off, bytes.length - off);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, path);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw writeError(path, e);
  }
  syncFolder(nodePath.dirname(path));
}

/** writeFileAtomic with the file I/O off the main thread (fs.promises). */
export async function writeFileAtomicAsync(path: string, bytes: Uint8Array): Promise<void> {
  checkPath(path);
  const tmp = tempName(path);
  try {
    const file = await fs.promises.open(tmp, 'w', 0o644);
    try {
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
    await fs.promises.rename(tmp, path);
  } catch (e) {
    await fs.promises.rm(tmp, { force: true });
    throw writeError(path, e);
  }
  syncFolder(nodePath.dirname(path));
}
