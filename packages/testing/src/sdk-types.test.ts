// The SDK's types catch what a plugin author gets wrong: a snippet written as an author would is
// type-checked with the repository's compiler settings, and exactly the lines marked `// error` must fail.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import ts from 'typescript';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'cnikit-sdk-types-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The 1-based lines with a type error in `source` (a module next to the repository's packages). */
function errorLines(source: string): number[] {
  const file = join(dir, `snippet-${Math.random().toString(16).slice(2)}.ts`);
  writeFileSync(file, source);
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) =>
        assert.fail(ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    },
  );
  assert.ok(parsed);
  const program = ts.createProgram([file], { ...parsed.options, baseUrl: ROOT, noEmit: true });
  const diags = ts.getPreEmitDiagnostics(program).filter((d) => d.file?.fileName === file);
  return [
    ...new Set(
      diags.map((d) => (d.file as ts.SourceFile).getLineAndCharacterOfPosition(d.start ?? 0).line + 1),
    ),
  ].sort((a, b) => a - b);
}

/** The lines of `source` marked `// error`. */
const marked = (source: string) =>
  source
    .split('\n')
    .map((l, i) => (l.endsWith('// error') ? i + 1 : 0))
    .filter(Boolean);

test('createSandbox / withSandbox / sandboxForFile take a name prefix; an unknown option does not type-check', () => {
  const src = `import { createSandbox, sandboxForFile, withSandbox } from '@cnikit/testing';
const sb = createSandbox({ prefix: 'myproj' });
sb.destroy();
await withSandbox(async (b) => b.host.name, { prefix: 'myproj', enterHost: true });
sandboxForFile({ prefix: 'myproj', containers: 2 });
createSandbox({ prefx: 'typo' }); // error
`;
  assert.deepEqual(errorLines(src), marked(src));
});

test('an async callback to withNetns, withNetnsFd or NetNS.do does not type-check; a synchronous one does', () => {
  const src = `import { NetNS, type Sync, withNetns, withNetnsFd } from '@cnikit/netlink';
const n: number = withNetns('/run/netns/x', () => 1);
const s: string = withNetns('/run/netns/x', (host) => host.path);
withNetns('/run/netns/x', () => {});
withNetns('/run/netns/x', async () => 1); // error
withNetns('/run/netns/x', () => Promise.resolve(1)); // error
withNetnsFd(3, async () => {}); // error
NetNS.current().do(async () => 1); // error
NetNS.current().do(() => 'sync');
// a generic wrapper passes the rule on with Sync<T>
const inNs = <T>(fn: () => Sync<T>): T => withNetns('/run/netns/x', fn);
inNs(() => 1);
inNs(async () => 1); // error
export { n, s };
`;
  assert.deepEqual(errorLines(src), marked(src));
});

test('expectOk returns a typed result (the current 1.x shape unless another type is named), not any', () => {
  const src = `import { type CniOutcome, expectOk } from '@cnikit/testing';
import type { Result020 } from '@cnikit/skel';
declare const r: CniOutcome;
const res = expectOk(r);
const v: string = res.cniVersion;
const name: string | undefined = res.interfaces?.[0]?.name;
const n: number = res.cniVersion; // error
res.noSuchField; // error
const old = expectOk<Result020>(r);
const ip: string | undefined = old.ip4?.ip;
export { ip, n, name, v };
`;
  assert.deepEqual(errorLines(src), marked(src));
});
