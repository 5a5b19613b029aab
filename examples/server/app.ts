/**
 * The digit classification service over node:http:
 *   POST /predict  body: a PNG (28×28 grayscale, white on black; other sizes are resampled)
 *                  → 200 {label, probabilities}
 *   GET  /health   → 200 {status: 'ok', model, queued, inFlight, uptimeSeconds} (503 once the model is gone)
 * Errors are JSON {error: {code, message}} with a 4xx status (5xx only when the model fails).
 * This thread only parses HTTP and checks the PNG header; decoding and the forward pass run in
 * the inference worker (inference.ts), so /health answers while predictions run.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

import { HttpError } from './http_error';
import { pngHeader } from './image';
import { Inference } from './inference';
import type { ModelInfo } from './protocol';

export interface ServerOptions {
  /** The ViTClassifier safetensors checkpoint. */
  checkpoint: string;
  /** Interface to listen on (default 127.0.0.1). */
  host?: string;
  /** Port (default 0: any free port). */
  port?: number;
  /** Largest accepted body (default 1 MiB): larger requests get 413. */
  maxBodyBytes?: number;
  /** Most images per forward (default 32). */
  maxBatch?: number;
  /** Most images waiting for the worker (default 256): more get 503. */
  maxQueue?: number;
}

export interface RunningServer {
  /** http://host:port */
  url: string;
  model: ModelInfo;
  server: http.Server;
  /** Stops listening, drops open connections and stops the worker. */
  close(): Promise<void>;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendError(res: http.ServerResponse, e: HttpError, headers: http.OutgoingHttpHeaders = {}): void {
  sendJson(res, e.status, { error: { code: e.code, message: e.message } }, headers);
}

/** Reads the body up to `limit` bytes; beyond that rejects with 413 (the rest is drained and dropped). */
function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tooLarge = () => new HttpError(413, 'payload_too_large', `Expected a body of at most ${limit} bytes but received more`);
    if (Number(req.headers['content-length']) > limit) {
      req.resume();
      return reject(tooLarge());
    }
    const chunks: Buffer[] = [];
    let size = 0, over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        reject(tooLarge());
      } else {
        chunks.push(chunk);
      }
    });
    req.on('end', () => over || resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('close', () => req.complete || reject(new HttpError(400, 'aborted', 'Expected a complete body but the client closed the connection')));
  });
}

/** Starts the service; resolves once the model is loaded and the port is listening. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const maxBodyBytes = options.maxBodyBytes ?? 1 << 20;
  const inference = new Inference(options.checkpoint, { maxBatch: options.maxBatch ?? 32, maxQueue: options.maxQueue ?? 256 });
  let model: ModelInfo;
  try {
    model = await inference.ready;
  } catch (e) {
    await inference.close();
    throw new Error(`Cannot load the checkpoint ${options.checkpoint}: ${(e as Error).message}`);
  }
  const started = Date.now();

  async function predict(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = await readBody(req, maxBodyBytes);
    pngHeader(body);
    const r = await inference.predict(body);
    if ('label' in r) sendJson(res, 200, { label: r.label, probabilities: r.probabilities });
    else sendError(res, new HttpError(r.status, r.code, r.message));
  }

  function health(res: http.ServerResponse): void {
    const down = inference.error;
    sendJson(res, down ? 503 : 200, { status: down ? 'unavailable' : 'ok', ...(down && { reason: down.message }), model,
      ...inference.load, uptimeSeconds: Math.round((Date.now() - started) / 1000) });
  }

  const routes: Record<string, { method: string; run: (req: http.IncomingMessage, res: http.ServerResponse) => void | Promise<void> }> = {
    '/predict': { method: 'POST', run: predict },
    '/health': { method: 'GET', run: (_req, res) => health(res) },
  };

  const server = http.createServer((req, res) => {
    const pathname = new URL(req.url ?? '/', 'http://localhost').pathname;
    const route = Object.hasOwn(routes, pathname) ? routes[pathname] : undefined;
    const fail = (e: unknown) => {
      const err = e instanceof HttpError ? e : new HttpError(500, 'internal', `Internal error: ${(e as Error)?.message ?? e}`);
      // A request whose body we stopped reading closes the connection after the answer.
      if (res.headersSent) res.destroy();
      else sendError(res, err, req.complete ? {} : { connection: 'close' });
    };
    if (!route) {
      req.resume();
      return fail(new HttpError(404, 'not_found', `Expected POST /predict or GET /health but received ${req.method} ${pathname}`));
    }
    if (req.method !== route.method) {
      req.resume();
      res.setHeader('allow', route.method);
      return fail(new HttpError(405, 'method_not_allowed', `Expected ${route.method} for ${pathname} but received ${req.method}`));
    }
    Promise.resolve()
      .then(() => route.run(req, res))
      .catch(fail);
  });
  server.requestTimeout = 30_000;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
    });
  } catch (e) {
    await inference.close();
    throw e;
  }
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    url: `http://${host}:${port}`, model, server,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await inference.close();
    },
  };
}
