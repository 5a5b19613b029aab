/** Checkpoints of a data-parallel run: rank 0 writes, every rank waits (built on the collectives' onRank0). */
import { type CheckpointState, saveCheckpointAsync } from '../training/checkpoint';
import { onRank0 } from './collectives';

/**
 * The data-parallel checkpoint: rank 0 writes `state` to `path` (saveCheckpointAsync: atomic,
 * queued behind the model's asynchronous calls), then every rank waits for it (onRank0). Resolves
 * true on the rank that wrote the file (rank 0) and false on the others; when the write fails every
 * rank rejects. The ranks' models are identical under DistributedDataParallel, so rank 0's state is
 * everyone's: to continue, call `resume` / `resumeAsync(path, { model, optimizer })` on every rank
 * (the model or its DistributedDataParallel wrapper: the parameter names are the same). Before init
 * it is saveCheckpointAsync.
 */
export async function saveCheckpoint(path: string, state: CheckpointState): Promise<boolean> {
  const wrote = await onRank0(async () => {
    await saveCheckpointAsync(path, state);
    return true;
  }, `saveCheckpoint(${JSON.stringify(path)})`);
  return wrote === true;
}
