/**
 * A local npm registry for install tests (test/package.test.ts): it serves every package of
 * nodeformer's dependency closure exactly as this clone's node_modules holds it (each folder packed
 * into a tarball here, nested node_modules left out), plus the tarballs given (nodeformer's own,
 * from `npm run pack:all` or packed by the test), on 127.0.0.1. npm, pnpm and Bun install from it
 * with an empty cache of their own, so neither the user's cache nor the network plays a part.
 */
import { execFile, execFileSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import * as zlib from 'node:zlib';

const root = path.resolve(__dirname, '..', '..');

/**
 * Runs a command (asynchronously, so the test worker stays responsive and its registry answers),
 * resolving to its standard output and error; a failure shows both in the error.
 */
export function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 1 << 26 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} failed (${err.message}):\n${stdout}${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

export interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  bundleDependencies?: string[] | boolean;
  bundledDependencies?: string[] | boolean;
}

/**
 * Every package that installing nodeformer brings in (dependencies, optional dependencies and
 * peer dependencies, transitively), found the way Node resolves them from this clone, keyed by
 * name@version. A required one that is missing means `npm install` has not been run.
 */
function dependencyClosure(): Map<string, { dir: string; manifest: Manifest }> {
  const found = new Map<string, { dir: string; manifest: Manifest }>();
  const seen = new Set<string>();
  const locate = (from: string, name: string): string | undefined => {
    for (let dir = from; ; dir = path.dirname(dir)) {
      const candidate = path.join(dir, 'node_modules', name);
      if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
      if (path.dirname(dir) === dir) return undefined;
    }
  };
  const visit = (dir: string, manifest: Manifest) => {
    const wanted: [string, boolean][] = [
      ...Object.keys(manifest.dependencies ?? {}).map((n): [string, boolean] => [n, false]),
      ...Object.keys(manifest.optionalDependencies ?? {}).map((n): [string, boolean] => [n, true]),
      ...Object.keys(manifest.peerDependencies ?? {}).map((n): [string, boolean] => [n, !!manifest.peerDependenciesMeta?.[n]?.optional]),
    ];
    for (const [name, optional] of wanted) {
      const child = locate(dir, name);
      if (!child) {
        if (!optional) throw new Error(`${name}, a dependency of ${manifest.name}, is not in node_modules: run npm install`);
        continue;
      }
      const real = fs.realpathSync(child);
      if (seen.has(real)) continue;
      seen.add(real);
      const m = JSON.parse(fs.readFileSync(path.join(child, 'package.json'), 'utf8')) as Manifest;
      if (!found.has(`${m.name}@${m.version}`)) found.set(`${m.name}@${m.version}`, { dir: real, manifest: m });
      visit(real, m);
    }
  };
  const own = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as Manifest;
  visit(root, { name: own.name, version: own.version, dependencies: own.dependencies, optionalDependencies: own.optionalDependencies,
    peerDependencies: own.peerDependencies, peerDependenciesMeta: own.peerDependenciesMeta });
  return found;
}

/**
 * A package folder as npm publishes it: a gzipped ustar archive of its files under package/,
 * without its nested node_modules (bundled dependencies excepted), modes 644/755, one fixed mtime.
 */
function packFolder(dir: string, manifest: Manifest): Buffer {
  const bundled = manifest.bundleDependencies ?? manifest.bundledDependencies;
  const bundledNames = bundled === true ? Object.keys(manifest.dependencies ?? {}) : Array.isArray(bundled) ? bundled : [];
  const blocks: Buffer[] = [];
  const header = (name: string, size: number, mode: number): Buffer => {
    const h = Buffer.alloc(512);
    let prefix = '';
    if (Buffer.byteLength(name) > 100) { // ustar: up to 155 bytes of leading folders go into `prefix`
      let at = name.indexOf('/');
      while (at >= 0 && Buffer.byteLength(name.slice(at + 1)) > 100) at = name.indexOf('/', at + 1);
      if (at < 0 || Buffer.byteLength(name.slice(0, at)) > 155) throw new Error(`path too long for a ustar header: ${name}`);
      prefix = name.slice(0, at);
      name = name.slice(at + 1);
    }
    h.write(name, 0, 100);
    h.write(`${mode.toString(8).padStart(7, '0')}\0`, 100);
    h.write('0000000\0', 108); // uid
    h.write('0000000\0', 116); // gid
    h.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
    h.write(`${(499162500).toString(8).padStart(11, '0')}\0`, 136); // npm's fixed mtime, 1985-10-26
    h.write('        ', 148); // the checksum counts its own field as spaces
    h.write('0', 156); // a regular file
    h.write('ustar\u000000', 257);
    h.write(prefix, 345, 155);
    let sum = 0;
    for (const byte of h) sum += byte;
    h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    return h;
  };
  const walk = (abs: string, rel: string) => {
    for (const entry of fs.readdirSync(abs, { withFileTypes: true }).sort((x, y) => (x.name < y.name ? -1 : 1))) {
      const r = rel ? `${rel}/${entry.name}` : entry.name;
      const full = path.join(abs, entry.name);
      if (r === 'node_modules') {
        for (const n of bundledNames) if (fs.existsSync(path.join(full, n))) walk(path.join(full, n), `node_modules/${n}`);
        continue;
      }
      const stat = fs.statSync(full);
      if (stat.isDirectory()) walk(full, r);
      else if (stat.isFile()) {
        const data = fs.readFileSync(full);
        blocks.push(header(`package/${r}`, data.length, stat.mode & 0o111 ? 0o755 : 0o644), data, Buffer.alloc((512 - (data.length % 512)) % 512));
      }
    }
  };
  walk(dir, '');
  blocks.push(Buffer.alloc(1024));
  return zlib.gzipSync(Buffer.concat(blocks), { level: 1 });
}

/** Orders x.y.z versions numerically (enough to pick a dist-tag; npm does the range matching). */
function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.+-]/).map(Number), pb = b.split(/[.+-]/).map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i] - pb[i];
  return 0;
}

/** A running registry: its address, what it holds, what was asked for and not found, and how to stop it. */
export interface Registry {
  url: string;
  packages: number;
  bytes: number;
  /** Names (and tarball paths) asked for that it does not hold. */
  notFound: string[];
  /** Optional dependencies and optional peers of what it holds, which it may lack. */
  optionalNames: Set<string>;
  close(): Promise<void>;
}

/**
 * Serves the dependency closure, and the package tarballs `extra` (each read for its
 * package.json), as an npm registry on 127.0.0.1: a packument per name (every version found,
 * `latest` the highest) and a tarball per version.
 */
export async function serveRegistry(extra: readonly string[] = []): Promise<Registry> {
  const packuments = new Map<string, { name: string; 'dist-tags': { latest: string }; versions: Record<string, unknown> }>();
  const tarballs = new Map<string, Buffer>();
  const optionalNames = new Set<string>();
  const notFound: string[] = [];
  let bytes = 0;
  const closure = dependencyClosure();
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent((req.url ?? '/').split('?')[0]).slice(1);
    const tarball = tarballs.get(url);
    const packument = packuments.get(url);
    if (tarball) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.length });
      res.end(tarball);
    } else if (packument) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(packument));
    } else {
      notFound.push(url);
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":"Not found"}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const packages = [
    ...[...closure.values()].map(({ dir, manifest }) => ({ manifest, data: packFolder(dir, manifest) })),
    ...extra.map((file) => ({ manifest: JSON.parse(execFileSync('tar', ['-xzOf', file, 'package/package.json'], { encoding: 'utf8' })) as Manifest,
      data: fs.readFileSync(file) })),
  ];
  for (const { manifest, data } of packages) {
    for (const n of Object.keys(manifest.optionalDependencies ?? {})) optionalNames.add(n);
    for (const [n, meta] of Object.entries(manifest.peerDependenciesMeta ?? {})) if (meta.optional) optionalNames.add(n);
    bytes += data.length;
    const file = `${manifest.name}/-/${manifest.name.split('/').pop()}-${manifest.version}.tgz`;
    tarballs.set(file, data);
    const doc = packuments.get(manifest.name) ?? { name: manifest.name, 'dist-tags': { latest: manifest.version }, versions: {} };
    if (compareVersions(manifest.version, doc['dist-tags'].latest) > 0) doc['dist-tags'].latest = manifest.version;
    doc.versions[manifest.version] = {
      ...manifest,
      _id: `${manifest.name}@${manifest.version}`,
      dist: {
        tarball: `${base}/${file}`,
        integrity: `sha512-${crypto.createHash('sha512').update(data).digest('base64')}`,
        shasum: crypto.createHash('sha1').update(data).digest('hex'),
      },
    };
    packuments.set(manifest.name, doc);
  }
  for (const { manifest } of packages) optionalNames.delete(manifest.name);
  return { url: `${base}/`, packages: packages.length, bytes, notFound, optionalNames,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

