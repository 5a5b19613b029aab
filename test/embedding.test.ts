import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import { dot, ErrorLog, f32, f64, finiteDiffErr, isas, randn32, relErr, rng, withIsa } from './helpers';

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('embedding forward, largest relative error');
  bwdLog.report('embedding backward, largest relative error');
});

function randomIds(n: number, V: number, rand: () => number): Int32Array {
  return Int32Array.from({ length: n }, () => Math.floor(rand() * V));
}

function sinusoidal32(len: number, D: number): Float32Array {
  const out = new Float32Array(len * D);
  native.sinusoidalEncoding({ len, D, out });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Token embedding

type EmbCase = { B: number; T: number; V: number; D: number; scale: number; pos: 'none' | 'learned' | 'sinusoidal'; maxLen: number };
const embCases: EmbCase[] = [
  { B: 1, T: 1, V: 5, D: 24, scale: 1, pos: 'none', maxLen: 1 },
  { B: 5, T: 7, V: 11, D: 72, scale: Math.sqrt(72), pos: 'learned', maxLen: 16 },
  { B: 1, T: 65, V: 1000, D: 96, scale: 1, pos: 'sinusoidal', maxLen: 65 },
  { B: 5, T: 197, V: 37, D: 40, scale: Math.sqrt(40), pos: 'learned', maxLen: 200 },
  { B: 3, T: 2, V: 3, D: 1, scale: 2, pos: 'sinusoidal', maxLen: 4 },
];

type EmbInputs = { ids: Int32Array; table: Float64Array; pos: Float64Array | null };

function embInputs(c: EmbCase, r: () => number): EmbInputs {
  const ids = randomIds(c.B * c.T, c.V, r);
  const table = randn32(c.V * c.D, r);
  const pos = c.pos === 'none' ? null : c.pos === 'learned' ? randn32(c.maxLen * c.D, r, 0.02) : f64(sinusoidal32(c.maxLen, c.D));
  return { ids, table, pos };
}

function embRefForward(c: EmbCase, x: EmbInputs): Float64Array {
  const out = new Float64Array(c.B * c.T * c.D);
  native.embeddingForward({ ...c, out, ids: x.ids, table: x.table, pos: x.pos });
  return out;
}

describe.each(isas)('embedding (%s)', (isa) => {
  it.each(embCases)('B=$B T=$T V=$V D=$D pos=$pos', (c) => {
    const r = rng(c.B * 131 + c.T * 7 + c.D);
    const x = embInputs(c, r);
    const n = c.B * c.T * c.D;
    const dout = randn32(n, r);
    const ref = embRefForward(c, x);
    const learned = c.pos === 'learned';
    const rdt = new Float64Array(c.V * c.D), rdp = learned ? new Float64Array(c.maxLen * c.D) : null;
    native.embeddingBackward({ ...c, dtable: rdt, dpos: rdp, dout, ids: x.ids });

    withIsa(isa, () => {
      const out = new Float32Array(n);
      native.embeddingForward({ ...c, out, ids: x.ids, table: f32(x.table), pos: x.pos && f32(x.pos) });
      expect(fwdLog.add(`${isa} out`, relErr(out, ref))).toBeLessThan(1e-5);
      // Parameter gradients accumulate onto what was there.
      const dt = new Float32Array(c.V * c.D).fill(0.5), dp = learned ? new Float32Array(c.maxLen * c.D).fill(-0.25) : null;
      native.embeddingBackward({ ...c, dtable: dt, dpos: dp, dout: f32(dout), ids: x.ids });
      expect(bwdLog.add(`${isa} dtable`, relErr(dt, rdt.map((v) => v + 0.5)))).toBeLessThan(1e-4);
      if (dp) expect(bwdLog.add(`${isa} dpos`, relErr(dp, rdp!.map((v) => v - 0.25)))).toBeLessThan(1e-4);
    });
  });
});

describe('embedding reference', () => {
  it('matches finite differences of its own forward', () => {
    const c: EmbCase = { B: 3, T: 5, V: 4, D: 6, scale: 1.7, pos: 'learned', maxLen: 8 };
    const r = rng(11);
    const x = embInputs(c, r), w = randn32(c.B * c.T * c.D, r);
    const loss = () => dot(embRefForward(c, x), w);
    const dt = new Float64Array(c.V * c.D), dp = new Float64Array(c.maxLen * c.D);
    native.embeddingBackward({ ...c, dtable: dt, dpos: dp, dout: w, ids: x.ids });
    expect(finiteDiffErr(loss, x.table, dt, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, x.pos!, dp, r, 48)).toBeLessThan(1e-6);  // rows >= T get 0
  });

  it('rejects out-of-range ids, naming the first, before writing anything', () => {
    const c = { B: 2, T: 3, V: 4, D: 5 };
    const table32 = new Float32Array(c.V * c.D).fill(1), table64 = f64(table32);
    for (const [bad, where] of [[-1, 4], [4, 2], [2 ** 31 - 1, 5], [-(2 ** 31), 0]]) {
      const ids = Int32Array.from([0, 1, 2, 3, 0, 1]);
      ids[where] = bad;
      const re = new RegExp(`ids\\[${where}\\] \\(batch ${Math.floor(where / c.T)}, position ${where % c.T}\\) is ${bad}, outside the vocabulary \\[0, 4\\)`);
      for (const [table, Arr] of [[table32, Float32Array], [table64, Float64Array]] as const) {
        const out = new Arr(c.B * c.T * c.D).fill(7);
        expect(() => native.embeddingForward({ ...c, out, ids, table })).toThrow(re);
        expect(out.every((v) => v === 7)).toBe(true);
        const dtable = new Arr(c.V * c.D).fill(7);
        expect(() => native.embeddingBackward({ ...c, dtable, dout: new Arr(c.B * c.T * c.D), ids })).toThrow(re);
        expect(dtable.every((v) => v === 7)).toBe(true);
      }
    }
  });

  it('rejects bad arguments with errors naming them', () => {
    const ok = { B: 2, T: 3, V: 4, D: 5, out: new Float32Array(30), ids: new Int32Array(6),
      table: new Float32Array(20) };
    expect(() => native.embeddingForward({ ...ok, table: new Float32Array(19) })).toThrow(/embeddingForward: .*length 20 for table/);
    expect(() => native.embeddingForward({ ...ok, ids: new Float32Array(6) as unknown as Int32Array })).toThrow(/Int32Array of length 6 for ids/);
    expect(() => native.embeddingForward({ ...ok, ids: new Int32Array(5) })).toThrow(/length 6 for ids/);
    expect(() => native.embeddingForward({ ...ok, pos: new Float32Array(14) })).toThrow(/length 15 for pos/);
    expect(() => native.embeddingForward({ ...ok, maxLen: 4, pos: new Float32Array(15) })).toThrow(/length 20 for pos/);
    expect(() => native.embeddingForward({ ...ok, maxLen: 2 })).toThrow(/for maxLen/);
    expect(() => native.embeddingForward({ ...ok, V: 0 })).toThrow(/for V/);
    expect(() => native.embeddingForward({ ...ok, D: 2.5 })).toThrow(/for D/);
    expect(() => native.embeddingForward({ ...ok, B: -1 })).toThrow(/for B/);
    expect(() => native.embeddingForward({ ...ok, scale: Infinity })).toThrow(/for scale/);
    expect(() => native.embeddingForward({ ...ok, out: new Float64Array(30) })).toThrow(/Float32Array of length 30 for out/);
    expect(() => native.embeddingBackward({ B: 2, T: 3, V: 4, D: 5, dtable: new Float32Array(20), dout: new Float32Array(30),
      ids: null as unknown as Int32Array })).toThrow(/embeddingBackward: .*for ids/);
    expect(() => native.embeddingBackward({ B: 2, T: 3, V: 4, D: 5, dtable: new Float32Array(20), dout: new Float32Array(30),
      ids: new Int32Array(6), dpos: new Float32Array(10) })).toThrow(/length 15 for dpos/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.embeddingForward(null)).toThrow(/expected one options object/);
  });
});

// ---------------------------------------------------------------------------------------------
// Sinusoidal positions

/** reference/torch_reference.py's sinusoidal_encoding, in JS doubles, rounded to float32. */
function sinusoidalJs(len: number, D: number): Float32Array {
  const out = new Float32Array(len * D);
  for (let p = 0; p < len; p++)
    for (let j = 0; j < D; j++) {
      const a = p / 10000 ** ((j - (j % 2)) / D);
      out[p * D + j] = j % 2 ? Math.cos(a) : Math.sin(a);
    }
  return out;
}

describe('sinusoidalEncoding', () => {
  it.each([[50, 24], [197, 96], [33, 7], [5, 1], [0, 4]])('len=%i D=%i matches the reference formula', (len, D) => {
    const fast = sinusoidal32(len, D), js = sinusoidalJs(len, D);
    const ref = new Float64Array(len * D);
    native.sinusoidalEncoding({ len, D, out: ref });
    let worst = 0, unrounded = 0;
    for (let i = 0; i < fast.length; i++) {
      worst = Math.max(worst, Math.abs(fast[i] - js[i]));
      if (fast[i] !== Math.fround(ref[i])) unrounded++;
    }
    expect(worst).toBeLessThanOrEqual(6e-8);  // one float32 ulp below 1, should libm and V8 differ
    expect(unrounded).toBe(0);  // the float table is the float64 reference rounded
    if (len > 0) expect([...fast.subarray(0, D)]).toEqual(Array.from({ length: D }, (_, j) => j % 2));
  });

  it('rejects bad arguments with errors naming them', () => {
    expect(() => native.sinusoidalEncoding({ len: 4, D: 3, out: new Float32Array(11) })).toThrow(/sinusoidalEncoding: .*length 12 for out/);
    expect(() => native.sinusoidalEncoding({ len: -1, D: 3, out: new Float32Array(0) })).toThrow(/for len/);
    expect(() => native.sinusoidalEncoding({ len: 4, D: 0, out: new Float32Array(0) })).toThrow(/for D/);
  });
});

// ---------------------------------------------------------------------------------------------
// ViT starts: CLS token + patches + pos_embed, and mask token + pos_embed

type VitCase = { B: number; N: number; D: number };
const vitCases: VitCase[] = [
  { B: 1, N: 1, D: 24 },
  { B: 5, N: 64, D: 72 },
  { B: 5, N: 196, D: 96 },
  { B: 2, N: 7, D: 40 },
  { B: 3, N: 0, D: 5 },
];

function clsRef(c: VitCase, cls: Float64Array, patches: Float64Array, pos: Float64Array): Float64Array {
  const out = new Float64Array(c.B * (c.N + 1) * c.D);
  native.clsPosForward({ ...c, out, cls, patches, pos });
  return out;
}

function tokRef(c: VitCase, token: Float64Array, pos: Float64Array): Float64Array {
  const out = new Float64Array(c.B * c.N * c.D);
  native.tokenPosForward({ ...c, out, token, pos });
  return out;
}

describe.each(isas)('ViT token starts (%s)', (isa) => {
  it.each(vitCases)('clsPos B=$B N=$N D=$D', (c) => {
    const r = rng(c.B * 17 + c.N * 3 + c.D);
    const R = c.N + 1;
    const cls = randn32(c.D, r), patches = randn32(c.B * c.N * c.D, r), pos = randn32(R * c.D, r, 0.02);
    const dout = randn32(c.B * R * c.D, r);
    const ref = clsRef(c, cls, patches, pos);
    const rdc = new Float64Array(c.D), rdpa = new Float64Array(c.B * c.N * c.D), rdp = new Float64Array(R * c.D);
    native.clsPosBackward({ ...c, dcls: rdc, dpatches: rdpa, dpos: rdp, dout });

    withIsa(isa, () => {
      const out = new Float32Array(c.B * R * c.D);
      native.clsPosForward({ ...c, out, cls: f32(cls), patches: f32(patches), pos: f32(pos) });
      expect(fwdLog.add(`${isa} clsPos out`, relErr(out, ref))).toBeLessThan(1e-5);
      const dc = new Float32Array(c.D).fill(0.5), dp = new Float32Array(R * c.D).fill(-0.25);
      const dpa = new Float32Array(c.B * c.N * c.D).fill(NaN);  // overwritten
      native.clsPosBackward({ ...c, dcls: dc, dpatches: dpa, dpos: dp, dout: f32(dout) });
      expect(bwdLog.add(`${isa} clsPos dcls`, relErr(dc, rdc.map((v) => v + 0.5)))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} clsPos dpatches`, relErr(dpa, rdpa))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} clsPos dpos`, relErr(dp, rdp.map((v) => v - 0.25)))).toBeLessThan(1e-4);
    });
  });

  it.each(vitCases)('tokenPos B=$B N=$N D=$D', (c) => {
    const r = rng(c.B * 19 + c.N * 5 + c.D);
    const token = randn32(c.D, r), pos = randn32(c.N * c.D, r, 0.02), dout = randn32(c.B * c.N * c.D, r);
    const ref = tokRef(c, token, pos);
    const rdt = new Float64Array(c.D), rdp = new Float64Array(c.N * c.D);
    native.tokenPosBackward({ ...c, dtoken: rdt, dpos: rdp, dout });

    withIsa(isa, () => {
      const out = new Float32Array(c.B * c.N * c.D);
      native.tokenPosForward({ ...c, out, token: f32(token), pos: f32(pos) });
      expect(fwdLog.add(`${isa} tokenPos out`, relErr(out, ref))).toBeLessThan(1e-5);
      const dt = new Float32Array(c.D).fill(0.5), dp = new Float32Array(c.N * c.D).fill(-0.25);
      native.tokenPosBackward({ ...c, dtoken: dt, dpos: dp, dout: f32(dout) });
      expect(bwdLog.add(`${isa} tokenPos dtoken`, relErr(dt, rdt.map((v) => v + 0.5)))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} tokenPos dpos`, relErr(dp, rdp.map((v) => v - 0.25)))).toBeLessThan(1e-4);
    });
  });
});

describe('ViT token starts reference', () => {
  it('matches finite differences of its own forward', () => {
    const c: VitCase = { B: 3, N: 4, D: 6 };
    const r = rng(5);
    const cls = randn32(c.D, r), patches = randn32(c.B * c.N * c.D, r), pos = randn32((c.N + 1) * c.D, r);
    const w = randn32(c.B * (c.N + 1) * c.D, r);
    const loss = () => dot(clsRef(c, cls, patches, pos), w);
    const dc = new Float64Array(c.D), dpa = new Float64Array(c.B * c.N * c.D), dp = new Float64Array((c.N + 1) * c.D);
    native.clsPosBackward({ ...c, dcls: dc, dpatches: dpa, dpos: dp, dout: w });
    expect(finiteDiffErr(loss, cls, dc, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, patches, dpa, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, pos, dp, r)).toBeLessThan(1e-6);

    const token = randn32(c.D, r), tpos = randn32(c.N * c.D, r), tw = randn32(c.B * c.N * c.D, r);
    const tloss = () => dot(tokRef(c, token, tpos), tw);
    const dt = new Float64Array(c.D), dtp = new Float64Array(c.N * c.D);
    native.tokenPosBackward({ ...c, dtoken: dt, dpos: dtp, dout: tw });
    expect(finiteDiffErr(tloss, token, dt, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(tloss, tpos, dtp, r)).toBeLessThan(1e-6);
  });

  it('rejects bad arguments with errors naming them', () => {
    const ok = { B: 2, N: 3, D: 4, out: new Float32Array(32), cls: new Float32Array(4), patches: new Float32Array(24),
      pos: new Float32Array(16) };
    expect(() => native.clsPosForward({ ...ok, pos: new Float32Array(12) })).toThrow(/clsPosForward: .*length 16 for pos/);
    expect(() => native.clsPosForward({ ...ok, cls: new Float64Array(4) })).toThrow(/Float32Array of length 4 for cls/);
    expect(() => native.clsPosForward({ ...ok, N: -1 })).toThrow(/for N/);
    expect(() => native.clsPosBackward({ B: 2, N: 3, D: 4, dcls: new Float32Array(4), dpatches: new Float32Array(24),
      dpos: new Float32Array(16), dout: new Float32Array(24) })).toThrow(/clsPosBackward: .*length 32 for dout/);
    expect(() => native.tokenPosForward({ B: 2, N: 3, D: 4, out: new Float32Array(24), token: new Float32Array(4),
      pos: null as unknown as Float32Array })).toThrow(/tokenPosForward: .*for pos/);
    expect(() => native.tokenPosBackward({ B: 2, N: 3, D: 0, dtoken: new Float32Array(0), dpos: new Float32Array(0),
      dout: new Float32Array(0) })).toThrow(/for D/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.tokenPosBackward()).toThrow(/expected one options object/);
  });
});
