import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeRequest, invokeInProcess } from './dispatch.ts';
import { CniError, ErrorCode } from './errors.ts';
import { decode, s } from './schema.ts';
import type { Plugin, Request, RequestBase } from './types.ts';

// The typed config API: Plugin<C>.conf decodes the raw config, handlers receive req.conf: C.

interface DemoConf {
  name: string;
  mtu: number;
  strict: boolean;
}

const schema = s.object({ name: s.string(), mtu: s.int().optional() });

function parseConf(raw: Record<string, unknown>, req: RequestBase): DemoConf {
  const c = decode(schema, raw);
  if (c.mtu !== undefined && c.mtu < 68)
    throw new CniError(ErrorCode.InvalidNetworkConfig, `mtu ${c.mtu} too small`);
  return { name: c.name, mtu: c.mtu ?? 1500, strict: req.command !== 'DEL' };
}

const ENV = {
  CNI_CONTAINERID: 'c1',
  CNI_NETNS: '/nonexistent/netns',
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/opt/cni/bin',
};
const env = (cmd: string) => ({ ...ENV, CNI_COMMAND: cmd });
const stdin = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ cniVersion: '1.1.0', name: 'net1', type: 'demo', ...extra });

function typedPlugin(seen: Array<{ command: string; conf: DemoConf }>, decoded: string[]): Plugin<DemoConf> {
  const record = (req: Request<DemoConf>) => {
    // req.conf is DemoConf without a cast: these property reads are type-checked
    const mtu: number = req.conf.mtu;
    seen.push({ command: req.command, conf: { name: req.conf.name, mtu, strict: req.conf.strict } });
  };
  return {
    name: 'demo',
    conf: (raw, req) => {
      decoded.push(req.command);
      return parseConf(raw, req);
    },
    add(req) {
      record(req);
      return { cniVersion: '1.1.0', ips: [{ address: '192.0.2.2/24' }] };
    },
    del: record,
    check: record,
    gc: record,
    status: record,
  };
}

describe('Plugin.conf: the SDK decodes the config and hands the verbs a typed req.conf', () => {
  for (const cmd of ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS']) {
    test(`${cmd}: the decoder runs once and the handler sees its value`, async () => {
      const seen: Array<{ command: string; conf: DemoConf }> = [];
      const decoded: string[] = [];
      const r = await invokeInProcess(typedPlugin(seen, decoded), env(cmd), stdin({ mtu: 9000 }));
      assert.equal(r.code, 0, r.stdout);
      assert.deepEqual(decoded, [cmd]);
      assert.deepEqual(seen, [{ command: cmd, conf: { name: 'net1', mtu: 9000, strict: cmd !== 'DEL' } }]);
    });
  }

  test('VERSION never runs the decoder, even with a config it would refuse', async () => {
    const decoded: string[] = [];
    const r = await invokeInProcess(typedPlugin([], decoded), env('VERSION'), stdin({ mtu: 1 }));
    assert.equal(r.code, 0);
    assert.deepEqual(decoded, []);
    assert.match(r.stdout, /supportedVersions/);
  });

  test('a CniError thrown by the decoder is the error object; the handler does not run', async () => {
    const seen: Array<{ command: string; conf: DemoConf }> = [];
    const r = await invokeInProcess(typedPlugin(seen, []), env('ADD'), stdin({ mtu: 10 }));
    assert.equal(r.code, 1);
    assert.deepEqual(JSON.parse(r.stdout), { code: 7, msg: 'mtu 10 too small' });
    assert.deepEqual(seen, []);
  });

  test('a schema error of the decoder keeps its code and text', async () => {
    const r = await invokeInProcess(typedPlugin([], []), env('DEL'), stdin({ mtu: 'big' }));
    assert.equal(r.code, 1);
    const e = JSON.parse(r.stdout) as { code: number; msg: string };
    assert.equal(e.code, ErrorCode.InvalidNetworkConfig);
    assert.match(e.msg, /mtu/);
  });

  test('a plain Error thrown by the decoder is code 999', async () => {
    const p: Plugin<never> = {
      name: 'demo',
      conf: () => {
        throw new Error('boom');
      },
      add: () => ({ cniVersion: '1.1.0' }),
    };
    const r = await invokeInProcess(p, env('ADD'), stdin());
    assert.equal(r.code, 1);
    assert.deepEqual(JSON.parse(r.stdout), { code: 999, msg: 'boom' });
  });

  test('the decoder runs after prevResult parsing: a bad prevResult is reported first', async () => {
    const decoded: string[] = [];
    const r = await invokeInProcess(typedPlugin([], decoded), env('ADD'), stdin({ mtu: 1, prevResult: 5 }));
    assert.equal(r.code, 1);
    assert.match((JSON.parse(r.stdout) as { msg: string }).msg, /could not parse prevResult/);
    assert.deepEqual(decoded, []);
  });

  test('a verb without a handler succeeds without decoding (the reference treats it as a no-op)', async () => {
    const decoded: string[] = [];
    const p: Plugin<DemoConf> = {
      name: 'demo',
      conf: (raw, req) => {
        decoded.push('x');
        return parseConf(raw, req);
      },
    };
    const r = await invokeInProcess(p, env('STATUS'), stdin({ mtu: 1 }));
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(decoded, []);
  });

  test('an ADD rolled back because its result cannot be delivered decodes the config again for DEL', async () => {
    const seen: Array<{ command: string; conf: DemoConf }> = [];
    const decoded: string[] = [];
    const r = await invokeInProcess(
      typedPlugin(seen, decoded),
      env('ADD'),
      JSON.stringify({ cniVersion: '0.2.0', name: 'net1', type: 'demo' }),
    );
    // the 1.1.0 result has an address, so 0.2.0 can express it: the ADD succeeds without rollback
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(decoded, ['ADD']);
    const noAddr: Plugin<DemoConf> = {
      ...typedPlugin(seen, decoded),
      add: () => ({ cniVersion: '1.1.0' }),
    };
    decoded.length = 0;
    seen.length = 0;
    const r2 = await invokeInProcess(
      noAddr,
      { ...env('ADD'), CNI_COMMAND: 'ADD' },
      JSON.stringify({ cniVersion: '0.2.0', name: 'net1', type: 'demo' }),
    );
    assert.equal(r2.code, 1);
    assert.deepEqual(decoded, ['ADD', 'DEL']);
    assert.deepEqual(seen, [{ command: 'DEL', conf: { name: 'net1', mtu: 1500, strict: false } }]);
  });

  test('without a decoder req.conf is the raw config (Plugin without a type argument)', async () => {
    const got: unknown[] = [];
    const p: Plugin = {
      name: 'raw',
      del(req) {
        const name: string = req.conf.name;
        got.push(name, req.conf === req.config, req.conf.extra);
      },
    };
    const r = await invokeInProcess(p, env('DEL'), stdin({ extra: [1] }));
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(got, ['net1', true, [1]]);
  });

  test('decodeRequest builds the request a handler receives, for tests that call handlers directly', () => {
    const base: RequestBase = {
      command: 'CHECK',
      containerId: 'c1',
      netns: '',
      ifName: 'eth0',
      args: '',
      path: [],
      stdin: new Uint8Array(),
      config: { cniVersion: '1.1.0', name: 'n2', type: 'demo', mtu: 1400 },
      cniVersion: '1.1.0',
      env: {},
      log: { debug() {}, info() {}, warn() {}, error() {} },
    };
    const req = decodeRequest(typedPlugin([], []), base);
    assert.deepEqual(req.conf, { name: 'n2', mtu: 1400, strict: true });
    assert.equal(req.containerId, 'c1');
    assert.throws(
      () => decodeRequest(typedPlugin([], []), { ...base, config: { ...base.config, mtu: 2 } }),
      (e: unknown) => CniError.is(e) && e.msg === 'mtu 2 too small',
    );
  });
});

describe('docs/plugin-shape.md: its config decoder example runs as written', () => {
  test('parseConf of the example: defaults, the ADD-only check, schema errors', async () => {
    const { readFileSync, mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const { tsBlocks, ROOT } = await import('../../../scripts/readme-snippets.ts');
    const block = tsBlocks(readFileSync(join(ROOT, 'docs', 'plugin-shape.md'), 'utf8'))[0];
    assert.ok(block?.includes('export function parseConf'));
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-shape-'));
    try {
      const file = join(dir, 'config.ts');
      const skel = new URL('./index.ts', import.meta.url).href;
      writeFileSync(file, (block ?? '').replace("from '@cnikit/skel'", `from ${JSON.stringify(skel)}`));
      const mod = (await import(file)) as {
        parseConf: (raw: Record<string, unknown>, req: { command: string }) => { name: string; mtu: number };
      };
      assert.deepEqual(mod.parseConf({ name: 'n' }, { command: 'ADD' }), { name: 'n', mtu: 1500 });
      assert.deepEqual(mod.parseConf({ name: 'n', mtu: 9000 }, { command: 'ADD' }), { name: 'n', mtu: 9000 });
      assert.throws(
        () => mod.parseConf({ name: 'n', mtu: 10 }, { command: 'ADD' }),
        (e: unknown) => CniError.is(e) && e.code === 7 && e.msg === 'mtu 10 is below 68',
      );
      assert.deepEqual(mod.parseConf({ name: 'n', mtu: 10 }, { command: 'DEL' }), { name: 'n', mtu: 10 });
      assert.throws(
        () => mod.parseConf({ name: 5 }, { command: 'DEL' }),
        (e: unknown) => CniError.is(e),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
