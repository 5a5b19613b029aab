import type { Module } from '../../lib';

/** An FNV-1a hash of a model's parameter bits: equal on two ranks exactly when their parameters are bit-identical. */
export function paramHash(m: Module): string {
  let h = 0x811c9dc5;
  for (const p of m.parameters()) {
    const u = new Uint32Array(p.data.buffer, p.data.byteOffset, p.size);
    for (let i = 0; i < u.length; i++) h = Math.imul(h ^ u[i], 0x01000193);
  }
  return (h >>> 0).toString(16);
}
