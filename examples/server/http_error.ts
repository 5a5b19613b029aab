/** A request that cannot be served: answered with `status` and a JSON error {error: {code, message}}. */
export class HttpError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}
