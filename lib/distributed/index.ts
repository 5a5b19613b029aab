/**
 * The `distributed` namespace of the package: the MPI collectives (init, allReduce, broadcast,
 * barrier, onRank0, ...) and the data-parallel checkpoint that rank 0 writes.
 */
export * from './collectives';
export { saveCheckpoint } from './checkpoint';
