import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { invokeInProcess } from './dispatch.ts';
import type { Plugin } from './types.ts';
import { ALL_VERSIONS } from './types.ts';

const VERBS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'];

const envValue = fc.oneof(
  fc.constantFrom(
    '',
    'c1',
    'eth0',
    '/nonexistent',
    '/proc/self/ns/net',
    '/opt/cni/bin',
    'IgnoreUnknown=1',
    '1',
    'true',
  ),
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
);
const envArb = fc.record(
  {
    CNI_COMMAND: fc.oneof(fc.constantFrom(...VERBS), fc.string({ maxLength: 8 })),
    CNI_CONTAINERID: envValue,
    CNI_NETNS: envValue,
    CNI_IFNAME: envValue,
    CNI_ARGS: envValue,
    CNI_PATH: envValue,
    CNI_NETNS_OVERRIDE: envValue,
  },
  { requiredKeys: [] },
);

const resultish = fc.oneof(
  fc.record(
    {
      cniVersion: fc.oneof(fc.constantFrom(...ALL_VERSIONS), fc.string({ maxLength: 6 })),
      ips: fc.array(
        fc.record(
          {
            address: fc.oneof(fc.constantFrom('10.0.0.1/8', 'fd00::1/64', 'x'), fc.string()),
            version: fc.constantFrom('4', '6', ''),
          },
          { requiredKeys: [] },
        ),
      ),
      ip4: fc.record({ ip: fc.oneof(fc.constant('10.0.0.1/8'), fc.string()) }, { requiredKeys: [] }),
      interfaces: fc.anything(),
      dns: fc.anything(),
    },
    { requiredKeys: [] },
  ),
  fc.anything(),
);

const configArb = fc.oneof(
  fc.record(
    {
      cniVersion: fc.oneof(fc.constantFrom(...ALL_VERSIONS, '', '1.0', '2.0.0'), fc.anything()),
      name: fc.oneof(fc.constantFrom('net', 'a.b-c_d', '-bad', ''), fc.string(), fc.anything()),
      type: fc.string(),
      prevResult: resultish,
      'cni.dev/valid-attachments': fc.anything(),
      runtimeConfig: fc.anything(),
    },
    { requiredKeys: [] },
  ),
  fc.anything(),
);

const stdinArb = fc.oneof(
  configArb.map((c) => {
    try {
      return JSON.stringify(c) ?? '';
    } catch {
      return '';
    }
  }),
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.uint8Array({ maxLength: 64 }),
);

const behaviour = fc.oneof(
  fc.constant({ kind: 'prev' as const }),
  fc.record({ kind: fc.constant('return' as const), value: resultish }),
  fc.record({ kind: fc.constant('throw' as const), value: fc.anything() }),
  fc.record({
    kind: fc.constant('cni' as const),
    code: fc.integer({ min: -5, max: 1200 }),
    msg: fc.string(),
    details: fc.string(),
  }),
);

type Behaviour = typeof behaviour extends fc.Arbitrary<infer T> ? T : never;

function pluginFor(b: Behaviour): Plugin {
  const act = async (req: Parameters<NonNullable<Plugin['add']>>[0]) => {
    if (b.kind === 'throw') throw b.value;
    if (b.kind === 'cni') {
      const { CniError } = await import('./errors.ts');
      throw new CniError(b.code, b.msg, b.details);
    }
    if (b.kind === 'return') return b.value as never;
    return req.prevResult ?? { cniVersion: '1.1.0', ips: [{ address: '10.0.0.9/24' }] };
  };
  return {
    name: 'prop',
    about: 'property plugin',
    add: act,
    del: async (r) => void (await act(r)),
    check: async (r) => void (await act(r)),
    gc: async (r) => void (await act(r)),
    status: async (r) => void (await act(r)),
  };
}

function checkOutput(
  code: number,
  stdout: string,
  cmd: string | undefined,
  stdin: string | Uint8Array,
): void {
  assert.ok(code === 0 || code === 1, `exit code ${code}`);
  assert.doesNotMatch(stdout, /\n\s+at .+[:(]/, 'no stack trace on stdout');
  if (stdout === '') {
    assert.equal(code, 0, 'an error always prints its JSON');
    return;
  }
  const doc = JSON.parse(stdout); // exactly one JSON document (trailing garbage would throw)
  assert.equal(typeof doc, 'object');
  assert.ok(doc !== null && !Array.isArray(doc));
  if (code === 1) {
    assert.deepEqual(
      Object.keys(doc).filter((k) => !['code', 'msg', 'details'].includes(k)),
      [],
    );
    assert.ok(Number.isInteger(doc.code) && doc.code >= 0, `code ${doc.code}`);
    assert.equal(typeof doc.msg, 'string');
    if ('details' in doc) assert.ok(typeof doc.details === 'string' && doc.details !== '');
    assert.ok(!stdout.endsWith('\n'));
  } else if (cmd === 'VERSION') {
    assert.ok(stdout.endsWith('}\n'));
    // the cniVersion asked for on stdin (SPEC.md §5 VERSION Success), else the current one
    let asked: unknown;
    try {
      asked = JSON.parse(typeof stdin === 'string' ? stdin : new TextDecoder().decode(stdin))?.cniVersion;
    } catch {
      asked = undefined;
    }
    assert.equal(doc.cniVersion, typeof asked === 'string' && asked !== '' ? asked : '1.1.0');
  } else {
    assert.equal(cmd, 'ADD', 'only ADD prints a result');
    assert.equal(typeof doc.cniVersion, 'string');
    assert.ok(ALL_VERSIONS.includes(doc.cniVersion), `printed version ${doc.cniVersion}`);
  }
}

describe('property: arbitrary env and stdin', () => {
  test('never exit 0 with garbage, stdout empty or exactly one JSON document, no stack traces', async () => {
    await fc.assert(
      fc.asyncProperty(envArb, stdinArb, behaviour, async (env, stdin, b) => {
        const r = await invokeInProcess(pluginFor(b), env, stdin);
        checkOutput(r.code, r.stdout, env.CNI_COMMAND, stdin);
      }),
      { numRuns: 700 },
    );
  });
  test('mostly-valid invocations: the same invariants with handlers that misbehave', async () => {
    const good = fc.record({
      CNI_COMMAND: fc.constantFrom(...VERBS),
      CNI_CONTAINERID: fc.constant('c1'),
      CNI_NETNS: fc.constant('/nonexistent'),
      CNI_IFNAME: fc.constant('eth0'),
      CNI_PATH: fc.constant('/opt/cni/bin'),
    });
    const conf = fc
      .record({
        cniVersion: fc.constantFrom(...ALL_VERSIONS),
        name: fc.constant('net'),
        prevResult: fc.option(resultish, { nil: undefined }),
      })
      .map((c) => JSON.stringify(c));
    await fc.assert(
      fc.asyncProperty(good, conf, behaviour, async (env, stdin, b) => {
        const r = await invokeInProcess(pluginFor(b), env, stdin);
        checkOutput(r.code, r.stdout, env.CNI_COMMAND, stdin);
        if (b.kind === 'throw' || b.kind === 'cni') {
          // a handler failure is an error, never a success (handlers run for every verb but VERSION)
          if (env.CNI_COMMAND !== 'VERSION') {
            assert.equal(r.code, 1);
          }
        }
      }),
      { numRuns: 700 },
    );
  });
});
