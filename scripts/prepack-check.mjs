#!/usr/bin/env node
// The `prepack` of every SDK package (run by `npm pack` / `npm publish` in the package's directory): a tarball
// whose package.json points at compiled files that are missing, or older than their sources, is refused with what
// to run instead of being packed silently without dist/.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.cwd();
const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));

/** Every file the manifest points at (exports' types/import/default, bin, main, types). */
function targets(value, out = []) {
  if (typeof value === 'string') {
    if (value.startsWith('./dist/') || value.startsWith('dist/')) out.push(value);
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) if (k !== 'cnikit-source') targets(v, out);
  }
  return out;
}
const files = [...new Set(targets([pkg.exports, pkg.bin, pkg.main, pkg.types]))];

function newest(d) {
  let t = 0;
  for (const e of readdirSync(d, { withFileTypes: true })) {
    const p = join(d, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p));
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

const problems = [];
const sources = newest(join(dir, 'src'));
for (const f of files) {
  let st;
  try {
    st = statSync(join(dir, f));
  } catch {
    problems.push(`${f} is missing`);
    continue;
  }
  if (st.mtimeMs < sources) problems.push(`${f} is older than the sources in src/`);
}
if (problems.length > 0) {
  process.stderr.write(
    `${pkg.name}: refusing to pack: ${problems.slice(0, 3).join('; ')}${problems.length > 3 ? `; … (${problems.length} files)` : ''}\n` +
      'Build first: `npm run build:packages` at the repository root, or make every SDK tarball at once with ' +
      '`npm run pack:sdk` (prints the one `npm install` that installs them).\n',
  );
  process.exit(1);
}
