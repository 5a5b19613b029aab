/**
 * One entry of the bad-input catalogue (test/bad_input.test.ts): a call that must fail with a JS
 * Error carrying `code`, whose message matches `names` (the argument it is about), and after which
 * `after` (when given) still holds — e.g. that nothing was half-loaded.
 */
export interface BadCase {
  /** What is wrong, for the test title. */
  title: string;
  /** The call; a returned Promise must reject. */
  run: () => unknown;
  code: string;
  /** The argument the message must name. */
  names: RegExp;
  after?: () => void;
}

/** Collects cases with a shared title prefix. */
export class Catalogue {
  readonly cases: BadCase[] = [];
  constructor(readonly prefix: string) {}
  add(title: string, code: string, names: RegExp, run: () => unknown, after?: () => void): void {
    this.cases.push({ title: `${this.prefix}: ${title}`, run, code, names, after });
  }
}
