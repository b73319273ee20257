#!/usr/bin/env node
/** The `cnikit-conformance` executable (the same CLI as `cnikit conformance`). */
import { fileURLToPath } from 'node:url';
import { conformanceMain } from './cli.ts';

process.exitCode = await conformanceMain(process.argv.slice(2), process, {
  reexec: [process.execPath, ...process.execArgv, fileURLToPath(import.meta.url)],
  name: 'cnikit-conformance',
});
