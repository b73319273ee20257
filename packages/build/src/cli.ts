#!/usr/bin/env node
/**
 * cnikit-build — CNI plugin modules → one single-file executable.
 *
 *   cnikit-build src/plugin.ts --out dist-bin/myplugin             one plugin, one executable
 *   cnikit-build src/a.ts src/b.ts --out dist-bin/mycni             one multicall executable + dist-bin/<plugin> links
 *   options: --backend bun|sea (default bun), --name NAME (the executable's file name when --out is a directory),
 *            --no-links, --force, --no-bytecode (bun), --no-code-cache (sea), --addon FILE, --work-dir DIR,
 *            --condition NAME (extra package.json export condition, repeatable), --quiet
 *   cnikit-build hello.ts                                          one plugin: --out defaults to ./hello
 * Prints the result as JSON on stdout (nothing with --quiet); exit 1 with the reason on stderr when the build
 * fails, 2 on a usage error.
 */
import { existsSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { BACKENDS, type Backend, buildExecutable, DEFAULT_BACKEND } from './build.ts';

export const USAGE = `usage: cnikit-build PLUGIN.ts... [--out FILE|DIR] [--backend bun|sea] [--name NAME] [--no-links]
                    [--force] [--no-bytecode] [--no-code-cache] [--addon FILE] [--work-dir DIR] [--condition NAME]
                    [--quiet]
Each PLUGIN module exports \`plugin\` (a @cnikit/skel Plugin) and does nothing at import time.
One plugin: one executable (default --out: the module's name without extension, in the current directory).
Several: one multicall executable plus a hard link per plugin name next to it (--out required).
Prints the result as JSON; --quiet prints nothing on success.
`;

export interface CliIO {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
}

/** Run the CLI; returns the exit code. */
export async function cli(argv: string[], io: CliIO = process): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    io.stderr.write(`cnikit-build: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.stdout.write(USAGE);
    return 0;
  }
  const backend = (values.backend ?? DEFAULT_BACKEND) as Backend;
  const problem =
    positionals.length === 0
      ? 'no plugin module given'
      : !values.out && positionals.length > 1
        ? '--out is required with several plugin modules'
        : !BACKENDS.includes(backend)
          ? `unknown back-end ${JSON.stringify(values.backend)} (bun | sea)`
          : positionals.find((p) => !existsSync(p))
            ? `no such file: ${positionals.find((p) => !existsSync(p))}`
            : undefined;
  if (problem) {
    io.stderr.write(`cnikit-build: ${problem}\n${USAGE}`);
    return 2;
  }
  let out = values.out ?? basename(positionals[0] as string).replace(/\.[cm]?[jt]sx?$/, '');
  const isDir = out.endsWith('/') || (existsSync(out) && statSync(out).isDirectory());
  if (isDir) out = join(out, values.name ?? (positionals.length === 1 ? 'plugin' : 'cnikit'));
  try {
    const r = await buildExecutable({
      plugins: positionals,
      out,
      backend,
      links: values['no-links'] ? false : undefined,
      force: values.force,
      bytecode: !values['no-bytecode'],
      codeCache: !values['no-code-cache'],
      addon: values.addon,
      workDir: values['work-dir'],
      conditions: values.condition,
      log: values.quiet ? () => {} : undefined,
    });
    if (!values.quiet) io.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
    return 0;
  } catch (err) {
    io.stderr.write(`cnikit-build: ${(err as Error).message}\n`);
    return 1;
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      out: { type: 'string', short: 'o' },
      backend: { type: 'string' },
      name: { type: 'string' },
      'no-links': { type: 'boolean' },
      force: { type: 'boolean' },
      'no-bytecode': { type: 'boolean' },
      'no-code-cache': { type: 'boolean' },
      addon: { type: 'string' },
      'work-dir': { type: 'string' },
      condition: { type: 'string', multiple: true },
      quiet: { type: 'boolean', short: 'q' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

const self = import.meta.url;
if (process.argv[1] && (self.endsWith('/cli.js') || self.endsWith('/cli.ts'))) {
  const { realpathSync } = await import('node:fs');
  const { fileURLToPath } = await import('node:url');
  if (realpathSync(process.argv[1]) === realpathSync(fileURLToPath(self))) {
    process.exitCode = await cli(process.argv.slice(2));
  }
}
