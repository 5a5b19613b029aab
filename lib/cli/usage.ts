/**
 * Errors in how the command line was used (bad flag values, missing or unreadable input files):
 * the command prints the message and exits with status 2, the usual code for usage errors.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Exit status of a usage error (unknown flag, bad value, missing file). */
export const USAGE_EXIT = 2;
