/**
 * The command line's program and command descriptions, declared once: lib/cli/program.ts gives them to
 * commander, and lib/bin.ts prints them as help where the command line's packages are not installed.
 */

/** What the program is for. */
export const PROGRAM_DESCRIPTION =
  'Transformer engine for Node.js: train a ViT on MNIST digits or a folder of images, evaluate it, classify pictures.';

/** Each command's one-paragraph description, in the order help lists them. */
export const COMMANDS = {
  train: 'train a ViT on MNIST digits (the demo: 8,000 train / 2,000 test) or, with --data, on a folder of images; ' +
    'write the best epoch\'s model.safetensors (and for MNIST, pictures) to --out',
  eval: 'evaluate a checkpoint on the MNIST test split',
  predict: 'classify pictures (any format sharp reads): digits for the demo\'s model (dark-on-light is inverted to ' +
    'MNIST\'s light-on-dark), or the classes of a model trained with --data',
  bench: 'kernel and model benchmarks (npm run bench in a clone of the repository); options after -- go to the harness, e.g. bench -- --quick',
} as const;

/** Whether the arguments ask for help (--help, -h, or the help command) rather than for a command's work. */
export function asksForHelp(argv: readonly string[]): boolean {
  return argv[0] === 'help' || argv.some((a) => a === '--help' || a === '-h');
}

/** The overview help: usage, the program's description and its commands (without their options). */
export function overviewHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return `Usage: nodeformer [options] [command]\n\n${PROGRAM_DESCRIPTION}\n\nCommands:\n` +
    Object.entries(COMMANDS).map(([name, text]) => `  ${name.padEnd(width)}  ${text}`).join('\n') + '\n';
}
