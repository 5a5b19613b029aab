/**
 * The sequence-to-sequence task: dates written the ways people write them ("april 5, 2023",
 * "5 apr 2023", "05.04.2023", ...) → ISO 8601 ("2023-04-05"), one character per token. The
 * model has to find the day, month and year wherever the format puts them, turn month names into
 * numbers and pad the day. Train and test sets are disjoint in *dates*: a held-out date never
 * appears in training in any format. Everything follows from the seed.
 */
import { Random } from '../../lib/core/random';

/** Token ids 0..2 are special; the characters follow. */
export const PAD = 0, BOS = 1, EOS = 2;
const CHARS = ' ,-./0123456789abcdefghijklmnopqrstuvwxyz';
/** Vocabulary size shared by source and target. */
export const VOCAB = 3 + CHARS.length;

const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october',
  'november', 'december'];
const FIRST_YEAR = 1950, YEARS = 100;

/** The human-readable formats of a date (y, m in 1..12, d). */
const FORMATS: ((y: number, m: number, d: number) => string)[] = [
  (y, m, d) => `${MONTHS[m - 1]} ${d}, ${y}`,
  (y, m, d) => `${d} ${MONTHS[m - 1]} ${y}`,
  (y, m, d) => `${MONTHS[m - 1].slice(0, 3)} ${d} ${y}`,
  (y, m, d) => `${d} ${MONTHS[m - 1].slice(0, 3)} ${y}`,
  (y, m, d) => `${two(d)}.${two(m)}.${y}`,
  (y, m, d) => `${y}/${m}/${d}`,
];

/** Longest source string ("september 30, 2049"). */
export const MAX_SRC = 18;
/** Target length in tokens: BOS, 10 characters, EOS. */
export const TGT_LEN = 12;

function two(n: number): string {
  return String(n).padStart(2, '0');
}

/** The date's ISO form. */
export function iso(y: number, m: number, d: number): string {
  return `${y}-${two(m)}-${two(d)}`;
}

/** Characters → token ids. */
export function encode(text: string): number[] {
  return [...text].map((c) => {
    const i = CHARS.indexOf(c);
    if (i < 0) throw new Error(`dates: no token for ${JSON.stringify(c)}`);
    return 3 + i;
  });
}

/** Token ids → characters, stopping at EOS and skipping BOS and PAD. */
export function decode(ids: ArrayLike<number>): string {
  let s = '';
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (id === EOS) break;
    if (id >= 3) s += CHARS[id - 3];
  }
  return s;
}

/** One example: the source text and its ISO target. */
export interface Pair {
  src: string;
  tgt: string;
}

/** A date as year, month, day. */
type YMD = [number, number, number];

/** Every date from FIRST_YEAR to FIRST_YEAR + YEARS − 1. */
function allDates(): YMD[] {
  const out: YMD[] = [];
  for (let y = FIRST_YEAR; y < FIRST_YEAR + YEARS; y++)
    for (let m = 1; m <= 12; m++) {
      const days = new Date(Date.UTC(y, m, 0)).getUTCDate();
      for (let d = 1; d <= days; d++) out.push([y, m, d]);
    }
  return out;
}

/**
 * The task's data: all dates shuffled by `seed`; the first `testDates` are the test set, the next
 * `validDates` the validation set (watched during training), the rest are for training. Training
 * pairs are drawn (date and format at random) from the training dates; test and validation pairs
 * cover each of their dates once, in a format chosen at random.
 */
export class DateTask {
  readonly train: YMD[];
  readonly valid: Pair[];
  readonly test: Pair[];
  private readonly rng: Random;

  constructor(options: { seed: number; testDates: number; validDates: number }) {
    const { testDates, validDates } = options;
    this.rng = new Random(options.seed);
    const dates = allDates();
    for (let i = dates.length - 1; i > 0; i--) {
      const j = this.rng.u32() % (i + 1);
      [dates[i], dates[j]] = [dates[j], dates[i]];
    }
    if (!(Number.isInteger(testDates) && Number.isInteger(validDates) && testDates > 0 && validDates >= 0 &&
        testDates + validDates < dates.length))
      throw new Error(`dates: testDates + validDates must be below ${dates.length}`);
    this.test = dates.slice(0, testDates).map((ymd) => this.pair(ymd));
    this.valid = dates.slice(testDates, testDates + validDates).map((ymd) => this.pair(ymd));
    this.train = dates.slice(testDates + validDates);
  }

  private pair([y, m, d]: YMD): Pair {
    return { src: FORMATS[this.rng.u32() % FORMATS.length](y, m, d), tgt: iso(y, m, d) };
  }

  /** `n` fresh training pairs. */
  trainBatch(n: number): Pair[] {
    return Array.from({ length: n }, () => this.pair(this.train[this.rng.u32() % this.train.length]));
  }
}

/**
 * Packs pairs for the Transformer: src [B, S] padded with PAD (S = longest source in the batch),
 * decoder input BOS + target and decoder labels target + EOS, both [B, TGT_LEN − 1].
 */
export function batchTensors(pairs: Pair[]): { src: Int32Array; S: number; tgtIn: Int32Array; tgtOut: Int32Array; T: number } {
  const B = pairs.length, srcIds = pairs.map((p) => encode(p.src));
  const S = Math.max(...srcIds.map((s) => s.length)), T = TGT_LEN - 1;
  const src = new Int32Array(B * S).fill(PAD), tgtIn = new Int32Array(B * T).fill(PAD), tgtOut = new Int32Array(B * T).fill(PAD);
  pairs.forEach((p, b) => {
    src.set(srcIds[b], b * S);
    const t = encode(p.tgt);
    tgtIn.set([BOS, ...t].slice(0, T), b * T);
    tgtOut.set([...t, EOS].slice(0, T), b * T);
  });
  return { src, S, tgtIn, tgtOut, T };
}
