/**
 * Streaming generation: a TokenStream is an async iterator over the tokens a generation program
 * emits, one Int32Array [B] per step. The program hands each step's tokens over through a host op
 * (lib/core/program.ts registerHostOp) that waits until the consumer asks for them, so generation runs
 * at most one step ahead of the loop reading it. When the consumer stops early (`break`, `return`,
 * a throw), the waiting op fails with a stop signal: the program unwinds through its finally blocks
 * (freeing the caches), and the iterator's return() resolves once it has.
 */
import { NodeformerError } from '../validation/errors';
import { registerHostOp, type OpRequest, type Program } from '../core/program';

/** Thrown into a generation program whose consumer stopped reading. */
class StreamStopped extends Error {}

/** The hand-over between one generation program and its consumer. */
export class TokenChannel {
  private item: { tokens: Int32Array; taken: () => void } | null = null;
  private wake: (() => void) | null = null;
  private stopped = false;
  private finished = false;
  private failure: { error: unknown } | null = null;

  /** The program's side: resolves when the consumer has taken `tokens`; rejects once the consumer has stopped. */
  put(tokens: Int32Array): Promise<void> {
    if (this.stopped) return Promise.reject(new StreamStopped('the stream was closed'));
    return new Promise((resolve, reject) => {
      this.item = { tokens, taken: resolve };
      this.onStop = () => reject(new StreamStopped('the stream was closed'));
      this.notify();
    });
  }

  /** The program ended (error: how it failed). */
  end(error?: { error: unknown }): void {
    this.finished = true;
    this.failure = error ?? null;
    this.notify();
  }

  /** The consumer's side: the next tokens, or null at the end; throws what the program threw. */
  async take(): Promise<Int32Array | null> {
    for (;;) {
      if (this.item) {
        const { tokens, taken } = this.item;
        this.item = null;
        this.onStop = null;
        taken();
        return tokens;
      }
      if (this.finished) {
        if (this.failure && !(this.failure.error instanceof StreamStopped)) throw this.failure.error;
        return null;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** The consumer stops reading: a pending or later put() rejects. */
  stop(): void {
    this.stopped = true;
    this.onStop?.();
    this.onStop = null;
    this.item = null;
  }

  private onStop: (() => void) | null = null;

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }
}

registerHostOp('generationEmit', () => {
  throw new NodeformerError('ERR_NF_STATE', 'a streaming generation program runs only asynchronously (generateStream)');
}, (args) => {
  const { channel, tokens } = args as { channel: TokenChannel; tokens: Int32Array };
  return channel.put(tokens);
});

/** The program step that hands `tokens` to `channel` (a copy: the program reuses its arrays). */
export function emitTo(channel: TokenChannel): (tokens: Int32Array) => Program<void> {
  return function* (tokens) {
    yield { op: 'generationEmit', args: { channel, tokens: Int32Array.from(tokens) } } as unknown as OpRequest;
  };
}

/**
 * The async iterator over a generation run: `start(channel)` queues the program (it emits into the
 * channel) and returns its promise. Breaking out of the loop stops the program and waits for it.
 */
export async function* tokenStream(start: (channel: TokenChannel) => Promise<unknown>): AsyncGenerator<Int32Array, void, undefined> {
  const channel = new TokenChannel();
  const run = start(channel).then(() => channel.end(), (error: unknown) => channel.end({ error }));
  try {
    for (let tokens = await channel.take(); tokens; tokens = await channel.take()) yield tokens;
  } finally {
    channel.stop();
    await run;
  }
}
