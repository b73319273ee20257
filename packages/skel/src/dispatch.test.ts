import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { invokeInProcess, netnsGuard } from './dispatch.ts';
import { CniError, ErrorCode } from './errors.ts';
import { decodeVersionInfo } from './exec.ts';
import type { Plugin, Request } from './types.ts';
import { ALL_VERSIONS } from './types.ts';

const ENV_NAMES = [
  'CNI_COMMAND',
  'CNI_CONTAINERID',
  'CNI_NETNS',
  'CNI_IFNAME',
  'CNI_ARGS',
  'CNI_PATH',
] as const;
const FULL: Record<string, string> = {
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'ctr-1',
  CNI_NETNS: '/nonexistent/netns',
  CNI_IFNAME: 'eth0',
  CNI_ARGS: 'IgnoreUnknown=1',
  CNI_PATH: '/opt/cni/bin',
};
const REQUIRED: Record<string, string[]> = {
  ADD: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  CHECK: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  DEL: ['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH'],
  GC: ['CNI_PATH'],
  STATUS: ['CNI_PATH'],
  VERSION: [],
  BOGUS: [],
};
const conf = (v = '1.1.0', extra: Record<string, unknown> = {}) =>
  JSON.stringify({ cniVersion: v, name: 'net1', type: 't', ...extra });

interface Calls {
  calls: Request[];
}
function recorder(overrides: Partial<Plugin> = {}): Plugin & Calls {
  const calls: Request[] = [];
  return {
    calls,
    name: 'rec',
    about: 'recorder plugin',
    add(req) {
      calls.push(req);
      return (
        req.prevResult ?? { cniVersion: '1.1.0', ips: [{ address: '10.0.0.2/24', gateway: '10.0.0.1' }] }
      );
    },
    del(req) {
      calls.push(req);
    },
    check(req) {
      calls.push(req);
    },
    gc(req) {
      calls.push(req);
    },
    status(req) {
      calls.push(req);
    },
    ...overrides,
  };
}

function parseErr(stdout: string): { code: number; msg: string; details?: string } {
  const j = JSON.parse(stdout);
  assert.deepEqual(
    Object.keys(j).filter((k) => !['code', 'msg', 'details'].includes(k)),
    [],
  );
  return j;
}

describe('environment: every combination per command', () => {
  for (const cmd of Object.keys(REQUIRED)) {
    const optional = ENV_NAMES.filter((n) => n !== 'CNI_COMMAND');
    // every subset of the other five variables being set (32 combinations per command)
    for (let mask = 0; mask < 1 << optional.length; mask++) {
      const env: Record<string, string> = { CNI_COMMAND: cmd };
      optional.forEach((n, i) => {
        if (mask & (1 << i)) env[n] = FULL[n]!;
      });
      const missing = REQUIRED[cmd]!.filter((n) => !(n in env));
      test(`${cmd} with ${Object.keys(env).join(',')}`, async () => {
        const p = recorder();
        const cv = cmd === 'CHECK' ? '0.4.0' : '1.1.0';
        const r = await invokeInProcess(p, env, conf(cv));
        if (missing.length > 0) {
          assert.equal(r.code, 1);
          assert.deepEqual(parseErr(r.stdout), {
            code: 4,
            msg: `required env variables [${missing.join(',')}] missing`,
          });
          assert.equal(p.calls.length, 0);
        } else if (cmd === 'BOGUS') {
          assert.equal(r.code, 1);
          assert.deepEqual(parseErr(r.stdout), { code: 4, msg: 'unknown CNI_COMMAND: BOGUS' });
        } else if (cmd === 'VERSION') {
          assert.equal(r.code, 0);
          assert.equal(
            r.stdout,
            `{"cniVersion":"1.1.0","supportedVersions":${JSON.stringify(ALL_VERSIONS)}}\n`,
          );
        } else {
          assert.equal(r.code, 0, r.stdout);
          assert.equal(p.calls.length, 1);
          const req = p.calls[0]!;
          assert.equal(req.command, cmd);
          assert.equal(req.containerId, env.CNI_CONTAINERID ?? '');
          assert.equal(req.netns, env.CNI_NETNS ?? '');
          assert.equal(req.ifName, env.CNI_IFNAME ?? '');
          assert.equal(req.args, env.CNI_ARGS ?? '');
          assert.deepEqual(req.path, env.CNI_PATH ? env.CNI_PATH.split(':') : []);
          if (cmd === 'ADD') assert.equal(JSON.parse(r.stdout).ips[0].address, '10.0.0.2/24');
          else assert.equal(r.stdout, '');
        }
      });
    }
  }

  test('no CNI_COMMAND at all, without about → code 4 naming CNI_COMMAND only', async () => {
    const p = recorder({ about: undefined });
    const r = await invokeInProcess(p, { CNI_CONTAINERID: 'x' }, conf());
    assert.equal(r.code, 1);
    assert.deepEqual(parseErr(r.stdout), { code: 4, msg: 'required env variables [CNI_COMMAND] missing' });
  });

  test('empty values count as missing', async () => {
    const env = { ...FULL, CNI_NETNS: '', CNI_PATH: '' };
    const r = await invokeInProcess(recorder(), env, conf());
    assert.deepEqual(parseErr(r.stdout), {
      code: 4,
      msg: 'required env variables [CNI_NETNS,CNI_PATH] missing',
    });
  });

  test('GC/STATUS: libcni-style empty CNI_CONTAINERID/NETNS/IFNAME/ARGS are fine', async () => {
    for (const cmd of ['GC', 'STATUS']) {
      const p = recorder();
      const env = {
        CNI_COMMAND: cmd,
        CNI_CONTAINERID: '',
        CNI_NETNS: '',
        CNI_IFNAME: '',
        CNI_ARGS: '',
        CNI_PATH: '/x',
      };
      const r = await invokeInProcess(p, env, conf());
      assert.equal(r.code, 0, r.stdout);
      assert.equal(p.calls.length, 1);
    }
  });

  test('GC/STATUS/VERSION/unknown do not validate container ID or ifname', async () => {
    const bad = { CNI_CONTAINERID: '-bad id', CNI_IFNAME: 'a/b:c d', CNI_PATH: '/x' };
    for (const cmd of ['GC', 'STATUS']) {
      const r = await invokeInProcess(recorder(), { ...bad, CNI_COMMAND: cmd }, conf());
      assert.equal(r.code, 0, r.stdout);
    }
    const v = await invokeInProcess(recorder(), { ...bad, CNI_COMMAND: 'VERSION' }, 'x');
    assert.equal(v.code, 0);
    const u = await invokeInProcess(recorder(), { ...bad, CNI_COMMAND: 'NOPE' }, conf());
    assert.deepEqual(parseErr(u.stdout), { code: 4, msg: 'unknown CNI_COMMAND: NOPE' });
  });

  test('command names are case-sensitive and not trimmed', async () => {
    for (const cmd of ['add', ' ADD', 'ADD ', 'version']) {
      const r = await invokeInProcess(recorder(), { ...FULL, CNI_COMMAND: cmd }, conf());
      assert.deepEqual(parseErr(r.stdout), { code: 4, msg: `unknown CNI_COMMAND: ${cmd}` });
    }
  });
});

describe('container ID and interface name validation', () => {
  test('a containerID over 128 bytes: ADD refuses it (code 4), CHECK and DEL accept it', async () => {
    const id = 'x'.repeat(500);
    const add = await invokeInProcess(
      recorder(),
      { ...FULL, CNI_COMMAND: 'ADD', CNI_CONTAINERID: id },
      conf('1.0.0'),
    );
    assert.deepEqual(parseErr(add.stdout), {
      code: 4,
      msg: 'containerID is too long',
      details: '500 bytes; cnikit plugins accept at most 128 (container runtimes use 64)',
    });
    for (const cmd of ['CHECK', 'DEL']) {
      const r = await invokeInProcess(
        recorder(),
        { ...FULL, CNI_COMMAND: cmd, CNI_CONTAINERID: id },
        conf('1.0.0'),
      );
      assert.equal(r.code, 0, r.stdout);
    }
  });
  const idCases: Array<[string, boolean]> = [
    ['abc', true],
    ['A1_b.c-d', true],
    ['0', true],
    ['_abc', false],
    ['.abc', false],
    ['-abc', false],
    ['abc\n', false],
    ['a b', false],
    ['a/b', false],
    ['ä', false],
    ['x'.repeat(128), true],
  ];
  for (const [id, ok] of idCases) {
    for (const cmd of ['ADD', 'CHECK', 'DEL']) {
      test(`${cmd} containerID ${JSON.stringify(id.slice(0, 20))} → ${ok ? 'ok' : 'error'}`, async () => {
        const r = await invokeInProcess(
          recorder(),
          { ...FULL, CNI_COMMAND: cmd, CNI_CONTAINERID: id },
          conf('1.0.0'),
        );
        if (ok) assert.equal(r.code, 0, r.stdout);
        else
          assert.deepEqual(parseErr(r.stdout), {
            code: 4,
            msg: 'invalid characters in containerID',
            details: id,
          });
      });
    }
  }

  const TOO_LONG = {
    code: 4,
    msg: 'interface name is too long',
    details: 'interface name should be less than 16 characters',
  };
  const DOTS = { code: 4, msg: 'interface name is . or ..' };
  const CHARS = { code: 4, msg: 'interface name contains / or : or whitespace characters' };
  const ifCases: Array<[string, object | null]> = [
    ['eth0', null],
    ['a'.repeat(15), null],
    ['a'.repeat(16), TOO_LONG],
    ['é'.repeat(7), null], // 14 bytes
    ['é'.repeat(8), TOO_LONG], // 8 characters but 16 bytes
    ['.', DOTS],
    ['..', DOTS],
    ['...', null],
    ['a/b', CHARS],
    ['a:b', CHARS],
    ['a b', CHARS],
    ['a\tb', CHARS],
    ['a\u0085', CHARS], // Go IsSpace, not JS \s
    ['a\u00a0', CHARS],
    ['a\u2028', CHARS],
    ['a\u3000', CHARS],
    ['a\ufeff', null], // JS \s, not Go IsSpace
    ['a\u200b', null],
  ];
  for (const [name, err] of ifCases) {
    test(`ifname ${JSON.stringify(name)} → ${err ? (err as { msg: string }).msg : 'ok'}`, async () => {
      const r = await invokeInProcess(recorder(), { ...FULL, CNI_IFNAME: name }, conf());
      if (!err) assert.equal(r.code, 0, r.stdout);
      else assert.deepEqual(parseErr(r.stdout), err);
    });
  }
});

describe('ordering rules (HEAD)', () => {
  test('invalid container ID wins over missing CNI_PATH', async () => {
    const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: '-x', CNI_NETNS: '/n', CNI_IFNAME: 'eth0' };
    const r = await invokeInProcess(recorder(), env, conf());
    assert.equal(parseErr(r.stdout).msg, 'invalid characters in containerID');
  });
  test('invalid ifname wins over missing CNI_NETNS', async () => {
    const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'x', CNI_IFNAME: 'a/b', CNI_PATH: '/p' };
    const r = await invokeInProcess(recorder(), env, conf());
    assert.equal(parseErr(r.stdout).msg, 'interface name contains / or : or whitespace characters');
  });
  test('container ID is checked before ifname', async () => {
    const r = await invokeInProcess(
      recorder(),
      { ...FULL, CNI_CONTAINERID: '-x', CNI_IFNAME: 'a/b' },
      conf(),
    );
    assert.equal(parseErr(r.stdout).msg, 'invalid characters in containerID');
  });
  test('env errors win over stdin errors', async () => {
    const r = await invokeInProcess(recorder(), { CNI_COMMAND: 'ADD' }, 'not json');
    assert.equal(parseErr(r.stdout).code, 4);
  });
  test('bad network name wins over unsupported version', async () => {
    const r = await invokeInProcess(recorder(), FULL, JSON.stringify({ cniVersion: '9.9.9', name: '-bad' }));
    assert.deepEqual(parseErr(r.stdout), {
      code: 7,
      msg: 'invalid characters found in network name',
      details: '-bad',
    });
  });
  test('unknown command: stdin problems win (6/7), then code 4', async () => {
    const env = { CNI_COMMAND: 'FOO' };
    assert.equal(parseErr((await invokeInProcess(recorder(), env, '{')).stdout).code, 6);
    assert.equal(parseErr((await invokeInProcess(recorder(), env, '{}')).stdout).code, 7);
    assert.equal(parseErr((await invokeInProcess(recorder(), env, '{"name":"n"}')).stdout).code, 4);
  });
  test('version error comes before the netns guard', async () => {
    const r = await invokeInProcess(recorder(), { ...FULL, CNI_NETNS: '/proc/self/ns/net' }, conf('2.0.0'));
    assert.equal(parseErr(r.stdout).code, 1);
  });
});

describe('stdin', () => {
  const code6: string[] = [
    '',
    '   \n',
    '{',
    '[]',
    '[1]',
    '"s"',
    '5',
    'true',
    '{"name":"a"} x',
    '{"name":"a"}{"name":"b"}',
    '\ufeff{"name":"a"}',
    '{"name":"a\u0000"}',
    '{"name":5}',
    '{"name":["a"]}',
    '{"NAME":{}}',
  ];
  for (const input of code6) {
    test(`code 6 for ${JSON.stringify(input)}`, async () => {
      const r = await invokeInProcess(recorder(), FULL, input);
      assert.equal(r.code, 1);
      const e = parseErr(r.stdout);
      assert.equal(e.code, 6);
      assert.match(
        e.msg,
        /^error unmarshall network config: (invalid character|unexpected end of JSON input|json: cannot unmarshal)/,
      );
    });
  }
  const code7: Array<[string, object]> = [
    ['null', { code: 7, msg: 'missing network name' }],
    ['{}', { code: 7, msg: 'missing network name' }],
    ['{"name":""}', { code: 7, msg: 'missing network name' }],
    ['{"name":null}', { code: 7, msg: 'missing network name' }],
    ['{"name":"a b"}', { code: 7, msg: 'invalid characters found in network name', details: 'a b' }],
    ['{"name":"_a"}', { code: 7, msg: 'invalid characters found in network name', details: '_a' }],
    ['{"name":"a\\n"}', { code: 7, msg: 'invalid characters found in network name', details: 'a\n' }],
  ];
  for (const [input, err] of code7) {
    test(`code 7 for ${input}`, async () => {
      const r = await invokeInProcess(recorder(), FULL, input);
      assert.deepEqual(parseErr(r.stdout), err);
    });
  }
  test('name and cniVersion keys match case-insensitively; unknown keys and whitespace are fine', async () => {
    const p = recorder();
    const r = await invokeInProcess(
      p,
      FULL,
      '  \n{"NAME":"net1","CNIVERSION":"0.3.1","cniVersions":["9"],"x":1}\n ',
    );
    assert.equal(r.code, 0, r.stdout);
    assert.equal(JSON.parse(r.stdout).cniVersion, '0.3.1');
    assert.equal(p.calls[0]!.cniVersion, '0.3.1');
  });
  test('the handler receives the raw stdin bytes unchanged', async () => {
    const p = recorder();
    const raw = ' {"name":"n",  "cniVersion":"1.0.0", "z":"é"} ';
    await invokeInProcess(p, FULL, raw);
    assert.equal(new TextDecoder().decode(p.calls[0]!.stdin), raw);
    assert.equal(p.calls[0]!.config.z, 'é');
  });
  test('read error → code 5', async () => {
    const { dispatch } = await import('./dispatch.ts');
    let out = '';
    const code = await dispatch(recorder(), {
      env: FULL,
      stdin: () => {
        throw new CniError(5, 'error reading from stdin: read /dev/stdin: is a directory');
      },
      stdout: { write: (s: string) => (out += s) },
      stderr: { write: () => true },
    });
    assert.equal(code, 1);
    assert.deepEqual(parseErr(out), {
      code: 5,
      msg: 'error reading from stdin: read /dev/stdin: is a directory',
    });
  });
  test('VERSION never reads a terminal; an unreadable stdin gets the current version', async () => {
    const { dispatch } = await import('./dispatch.ts');
    let out = '';
    const code = await dispatch(recorder(), {
      env: { CNI_COMMAND: 'VERSION' },
      stdin: () => {
        throw new Error('stdin must not be read');
      },
      stdinIsTerminal: () => true,
      stdout: { write: (s: string) => (out += s) },
      stderr: { write: () => true },
    });
    assert.equal(code, 0);
    assert.equal(JSON.parse(out).cniVersion, '1.1.0');
    out = '';
    const code2 = await dispatch(recorder(), {
      env: { CNI_COMMAND: 'VERSION' },
      stdin: () => {
        throw new CniError(ErrorCode.IOFailure, 'error reading from stdin: bad file descriptor');
      },
      stdout: { write: (s: string) => (out += s) },
      stderr: { write: () => true },
    });
    assert.equal(code2, 0);
    assert.equal(JSON.parse(out).cniVersion, '1.1.0');
  });
  test('VERSION echoes the cniVersion on stdin (SPEC.md §5 VERSION Success), the current one otherwise', async () => {
    const cases: Array<[string, string]> = [
      ['{"cniVersion":"0.3.1"}', '0.3.1'],
      ['{"CNIVERSION":"0.4.0"}', '0.4.0'],
      ['{"cniVersion":"0.2.0","name":"x"}', '0.2.0'],
      ['{"cniVersion":""}', '1.1.0'],
      ['{"cniVersion":1}', '1.1.0'],
      ['[1]', '1.1.0'],
      ['', '1.1.0'],
      ['not json', '1.1.0'],
    ];
    for (const [stdin, want] of cases) {
      const r = await invokeInProcess(recorder(), { CNI_COMMAND: 'VERSION' }, stdin);
      assert.equal(r.code, 0, stdin);
      assert.equal(
        r.stdout,
        `{"cniVersion":"${want}","supportedVersions":${JSON.stringify(ALL_VERSIONS)}}\n`,
        stdin,
      );
      // both forms decode (libcni's decoder, like Go's version.PluginDecoder)
      assert.deepEqual(decodeVersionInfo(new TextEncoder().encode(r.stdout)).supportedVersions, ALL_VERSIONS);
    }
  });
});

describe('version negotiation', () => {
  const details = (v: string, list: readonly string[] = ALL_VERSIONS) =>
    `config is "${v.replace(/\n/g, '\\n')}", plugin supports [${list.map((x) => `"${x}"`).join(' ')}]`;
  for (const v of ['1.0', 'v1.0.0', ' 1.0.0', 'abc', '2.0.0', '0.2', '1.1.0\n']) {
    for (const cmd of ['ADD', 'DEL']) {
      test(`${cmd} cniVersion ${JSON.stringify(v)} → code 1`, async () => {
        const r = await invokeInProcess(recorder(), { ...FULL, CNI_COMMAND: cmd }, conf(v));
        assert.deepEqual(parseErr(r.stdout), {
          code: 1,
          msg: 'incompatible CNI versions',
          details: details(v),
        });
      });
    }
  }
  test('missing / empty / null cniVersion means 0.1.0', async () => {
    for (const input of ['{"name":"n"}', '{"name":"n","cniVersion":""}', '{"name":"n","cniVersion":null}']) {
      const p = recorder();
      const r = await invokeInProcess(p, FULL, input);
      assert.equal(r.code, 0, r.stdout);
      assert.equal(p.calls[0]!.cniVersion, '0.1.0');
      assert.equal(JSON.parse(r.stdout).cniVersion, '0.1.0');
      assert.equal(JSON.parse(r.stdout).ip4.ip, '10.0.0.2/24');
    }
  });
  test('non-string cniVersion → code 6', async () => {
    const r = await invokeInProcess(recorder(), FULL, '{"name":"n","cniVersion":1}');
    assert.equal(parseErr(r.stdout).code, 6);
    assert.match(parseErr(r.stdout).msg, /^decoding version from network config: /);
  });
  test('plugin versions restrict what is accepted', async () => {
    const p = recorder({ versions: ['0.3.1', '0.4.0'] });
    const r = await invokeInProcess(p, FULL, conf('1.0.0'));
    assert.deepEqual(parseErr(r.stdout), {
      code: 1,
      msg: 'incompatible CNI versions',
      details: details('1.0.0', ['0.3.1', '0.4.0']),
    });
    const v = await invokeInProcess(p, { CNI_COMMAND: 'VERSION' });
    assert.equal(v.stdout, '{"cniVersion":"1.1.0","supportedVersions":["0.3.1","0.4.0"]}\n');
  });

  const gateCases: Array<[string, string, readonly string[] | undefined, object | null]> = [
    ['CHECK', '0.3.1', undefined, { code: 1, msg: 'config version does not allow CHECK' }],
    ['CHECK', '', undefined, { code: 1, msg: 'config version does not allow CHECK' }],
    ['CHECK', '0.4.0', undefined, null],
    ['CHECK', '1.0.0', undefined, null],
    ['CHECK', '1.0.5', undefined, { code: 1, msg: 'incompatible CNI versions', details: details('1.0.5') }],
    ['CHECK', '1.0.0', ['0.4.0'], { code: 1, msg: 'plugin version does not allow CHECK' }],
    [
      'CHECK',
      'abc',
      undefined,
      {
        code: 6,
        msg: 'failed to convert major version part "abc": strconv.Atoi: parsing "abc": invalid syntax',
      },
    ],
    ['CHECK', '1.2.3.4', undefined, { code: 6, msg: 'invalid version "1.2.3.4": too many parts' }],
    [
      'CHECK',
      '0.4.0',
      ['0.1.0', '0.2.0', 'adsfasdf'],
      {
        code: 6,
        msg: 'failed to convert major version part "adsfasdf": strconv.Atoi: parsing "adsfasdf": invalid syntax',
      },
    ],
    ['GC', '1.1.0', ['1.1.0', 'bogus'], null],
    ['GC', '1.0.0', undefined, { code: 1, msg: 'config version does not allow GC' }],
    ['GC', '1.1.0', undefined, null],
    ['GC', '1.1.0', ['1.0.0'], { code: 1, msg: 'plugin version does not allow GC' }],
    ['STATUS', '0.4.0', undefined, { code: 1, msg: 'config version does not allow STATUS' }],
    ['STATUS', '1.1.0', undefined, null],
    ['STATUS', '1.1.0', ['0.4.0', '1.0.0'], { code: 1, msg: 'plugin version does not allow STATUS' }],
    ['STATUS', '1.1', undefined, { code: 1, msg: 'incompatible CNI versions', details: details('1.1') }],
  ];
  for (const [cmd, v, versions, err] of gateCases) {
    test(`${cmd} config ${JSON.stringify(v)} plugin ${versions ? versions.join(',') : 'all'} → ${err ? JSON.stringify(err) : 'ok'}`, async () => {
      const p = recorder(versions ? { versions } : {});
      const input = v === '' ? '{"name":"n"}' : conf(v);
      const r = await invokeInProcess(p, { ...FULL, CNI_COMMAND: cmd }, input);
      if (err) {
        assert.deepEqual(parseErr(r.stdout), err);
        assert.equal(p.calls.length, 0);
      } else {
        assert.equal(r.code, 0, r.stdout);
        assert.equal(p.calls.length, 1);
      }
    });
  }
});

describe('handlers and output', () => {
  test('missing handler: GC/STATUS/DEL/CHECK succeed silently', async () => {
    const p: Plugin = { name: 'bare', add: () => ({ cniVersion: '1.1.0' }) };
    for (const cmd of ['GC', 'STATUS', 'DEL', 'CHECK']) {
      const r = await invokeInProcess(p, { ...FULL, CNI_COMMAND: cmd }, conf());
      assert.deepEqual(r, { code: 0, stdout: '', stderr: '' });
    }
  });
  test('a result the config version cannot express fails the ADD and is rolled back with DEL', async () => {
    const calls: string[] = [];
    const p: Plugin = {
      name: 'x',
      add: (req) => {
        calls.push(`ADD ${req.containerId}`);
        return { cniVersion: '1.1.0', interfaces: [{ name: 'lo' }] }; // no address: nothing to print as 0.2.0
      },
      del: (req) => {
        calls.push(`${req.command} ${req.containerId}`);
      },
    };
    const r = await invokeInProcess(p, FULL, conf('0.2.0'));
    assert.equal(r.code, 1);
    assert.deepEqual(parseErr(r.stdout), { code: 999, msg: 'cannot convert: no valid IP addresses' });
    assert.deepEqual(calls, ['ADD ctr-1', 'DEL ctr-1']);
    // the same result in a version that can express it: no rollback
    calls.length = 0;
    assert.equal((await invokeInProcess(p, FULL, conf('1.0.0'))).code, 0);
    assert.deepEqual(calls, ['ADD ctr-1']);
  });
  test('about banner on bare invocation: stderr only, exit 0, stdin not needed', async () => {
    const r = await invokeInProcess(recorder({ versions: ['0.4.0', '1.0.0'] }), {}, 'garbage');
    assert.equal(r.code, 0);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'recorder plugin\nCNI protocol versions supported: 0.4.0, 1.0.0\n');
  });
  test('CniError passes through unchanged; other errors become 999 once', async () => {
    const throwing = (e: unknown): Plugin => ({
      name: 'x',
      add: () => {
        throw e;
      },
    });
    let r = await invokeInProcess(throwing(new CniError(11, 'busy', 'try later')), FULL, conf());
    assert.equal(r.stdout, '{\n    "code": 11,\n    "msg": "busy",\n    "details": "try later"\n}');
    r = await invokeInProcess(throwing(new Error('boom')), FULL, conf());
    assert.equal(r.stdout, '{\n    "code": 999,\n    "msg": "boom"\n}');
    assert.equal(r.code, 1);
    r = await invokeInProcess(throwing('plain string'), FULL, conf());
    assert.deepEqual(parseErr(r.stdout), { code: 999, msg: 'plain string' });
    const wrapped = CniError.from(new Error('inner'));
    r = await invokeInProcess(throwing(CniError.from(wrapped)), FULL, conf());
    assert.deepEqual(parseErr(r.stdout), { code: 999, msg: 'inner' });
    assert.doesNotMatch(r.stdout, /at .*\.ts/);
  });
  test('async rejection is handled like a throw', async () => {
    const p: Plugin = {
      name: 'x',
      del: async () => {
        await new Promise((res) => setTimeout(res, 1));
        throw new CniError(3, 'gone');
      },
    };
    const r = await invokeInProcess(p, { ...FULL, CNI_COMMAND: 'DEL' }, conf());
    assert.deepEqual(parseErr(r.stdout), { code: 3, msg: 'gone' });
  });
  test('errors escape <, >, & like Go', async () => {
    const p: Plugin = {
      name: 'x',
      add: () => {
        throw new Error('a<b>&c');
      },
    };
    const r = await invokeInProcess(p, FULL, conf());
    assert.equal(r.stdout, '{\n    "code": 999,\n    "msg": "a\\u003cb\\u003e\\u0026c"\n}');
  });
  test('ADD result printed in the config version, 4-space indent, no trailing newline', async () => {
    const r = await invokeInProcess(recorder(), FULL, conf('0.3.1'));
    assert.equal(
      r.stdout,
      '{\n    "cniVersion": "0.3.1",\n    "ips": [\n        {\n            "version": "4",\n            "address": "10.0.0.2/24",\n            "gateway": "10.0.0.1"\n        }\n    ],\n    "dns": {}\n}',
    );
  });
  test('ADD result that cannot be converted → 999', async () => {
    const p = recorder({ add: () => ({ cniVersion: '1.1.0', interfaces: [{ name: 'eth0' }] }) });
    const r = await invokeInProcess(p, FULL, conf('0.2.0'));
    assert.deepEqual(parseErr(r.stdout), { code: 999, msg: 'cannot convert: no valid IP addresses' });
  });
  test('ADD handler returning nothing → 999', async () => {
    const p = recorder({ add: (() => undefined) as unknown as Plugin['add'] });
    const r = await invokeInProcess(p, FULL, conf());
    assert.equal(parseErr(r.stdout).code, 999);
  });
  test('request carries env, config and a logger that never writes stdout', async () => {
    const p = recorder({
      add(req) {
        req.log.error('to stderr %d', 42);
        return { cniVersion: '1.1.0', ips: [{ address: '10.9.9.9/8' }] };
      },
    });
    const r = await invokeInProcess(p, { ...FULL, OTHER: 'x' }, conf('1.1.0', { logLevel: 'debug' }));
    assert.equal(r.code, 0);
    assert.match(r.stderr, /ERROR rec\[\d+\]: to stderr 42/);
    assert.equal(JSON.parse(r.stdout).ips[0].address, '10.9.9.9/8');
  });
});

describe('prevResult', () => {
  const prev040 = {
    cniVersion: '0.4.0',
    interfaces: [{ name: 'eth0', mac: '0a:58:0a:00:00:02', sandbox: '/var/run/netns/x' }],
    ips: [{ version: '4', interface: 0, address: '10.0.0.2/24', gateway: '10.0.0.1' }],
    routes: [{ dst: '0.0.0.0/0' }],
    dns: {},
  };
  test('parsed in the config family and handed over in the 1.1.0 shape', async () => {
    const p = recorder();
    const r = await invokeInProcess(p, FULL, conf('0.4.0', { prevResult: prev040 }));
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(p.calls[0]!.prevResult, {
      cniVersion: '1.1.0',
      interfaces: [{ name: 'eth0', mac: '0a:58:0a:00:00:02', sandbox: '/var/run/netns/x' }],
      ips: [{ interface: 0, address: '10.0.0.2/24', gateway: '10.0.0.1' }],
      routes: [{ dst: '0.0.0.0/0' }],
    });
    // passed through and printed back in the config version
    assert.deepEqual(JSON.parse(r.stdout), prev040);
  });
  test('missing prevResult cniVersion takes the config version', async () => {
    const p = recorder();
    const { cniVersion: _, ...noVersion } = prev040;
    const r = await invokeInProcess(p, FULL, conf('0.3.1', { prevResult: noVersion }));
    assert.equal(r.code, 0, r.stdout);
    assert.equal(JSON.parse(r.stdout).cniVersion, '0.3.1');
  });
  test('other member of the same family is accepted', async () => {
    const p = recorder();
    const r = await invokeInProcess(
      p,
      FULL,
      conf('1.1.0', { prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.1.1.1/16' }] } }),
    );
    assert.equal(r.code, 0, r.stdout);
    assert.equal(p.calls[0]!.prevResult!.ips![0]!.address, '10.1.1.1/16');
  });
  test('cross-family prevResult → 999 with the Go text', async () => {
    const r = await invokeInProcess(recorder(), FULL, conf('0.4.0', { prevResult: { cniVersion: '1.0.0' } }));
    assert.deepEqual(parseErr(r.stdout), {
      code: 999,
      msg: 'could not parse prevResult: result type supports [0.3.0 0.3.1 0.4.0] but unmarshalled CNIVersion is "1.0.0"',
    });
  });
  test('bad address in prevResult → 999 invalid CIDR address', async () => {
    const r = await invokeInProcess(
      recorder(),
      { ...FULL, CNI_COMMAND: 'DEL' },
      conf('1.0.0', { prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.0.0.300/24' }] } }),
    );
    assert.deepEqual(parseErr(r.stdout), {
      code: 999,
      msg: 'could not parse prevResult: invalid CIDR address: 10.0.0.300/24',
    });
  });
  test('prevResultErrorPrefix matches a reference plugin wording; parsePrevResult: false leaves it to the plugin', async () => {
    const bad = conf('0.4.0', { prevResult: { cniVersion: '1.0.0' } });
    const r = await invokeInProcess(
      recorder({ prevResultErrorPrefix: 'failed to parse prevResult: ' }),
      FULL,
      bad,
    );
    assert.deepEqual(parseErr(r.stdout), {
      code: 999,
      msg: 'failed to parse prevResult: could not parse prevResult: result type supports [0.3.0 0.3.1 0.4.0] but unmarshalled CNIVersion is "1.0.0"',
    });
    const own = recorder({ parsePrevResult: false });
    const d = await invokeInProcess(own, { ...FULL, CNI_COMMAND: 'DEL' }, bad);
    assert.equal(d.code, 0, d.stdout);
    assert.equal(own.calls[0]!.prevResult, undefined);
    const { parsePrevResult } = await import('./dispatch.ts');
    assert.throws(
      () => parsePrevResult(own.calls[0]!.config, own.calls[0]!.cniVersion),
      /^Error: could not parse prevResult: /,
    );
    assert.deepEqual(
      parsePrevResult({ prevResult: { ips: [{ version: '4', address: '10.0.0.1/8' }] } }, '0.3.1'),
      {
        cniVersion: '1.1.0',
        ips: [{ address: '10.0.0.1/8' }],
      },
    );
    assert.equal(parsePrevResult({}, '1.0.0'), undefined);
  });
  test('CHECK gets prevResult too; GC/STATUS do not parse it', async () => {
    const p = recorder();
    await invokeInProcess(p, { ...FULL, CNI_COMMAND: 'CHECK' }, conf('0.4.0', { prevResult: prev040 }));
    assert.equal(p.calls[0]!.prevResult!.ips![0]!.address, '10.0.0.2/24');
    const g = await invokeInProcess(p, { ...FULL, CNI_COMMAND: 'GC' }, conf('1.1.0', { prevResult: 'junk' }));
    assert.equal(g.code, 0, g.stdout);
  });
});

describe('GC attachments', () => {
  test('cni.dev/valid-attachments, falling back to cni.dev/attachments', async () => {
    const list = [{ containerID: 'c1', ifname: 'eth0' }];
    for (const key of ['cni.dev/valid-attachments', 'cni.dev/attachments']) {
      const p = recorder();
      const r = await invokeInProcess(
        p,
        { CNI_COMMAND: 'GC', CNI_PATH: '/p' },
        conf('1.1.0', { [key]: list }),
      );
      assert.equal(r.code, 0, r.stdout);
      assert.deepEqual(p.calls[0]!.validAttachments, list);
    }
    const p = recorder();
    await invokeInProcess(
      p,
      { CNI_COMMAND: 'GC', CNI_PATH: '/p' },
      conf('1.1.0', {
        'cni.dev/valid-attachments': list,
        'cni.dev/attachments': [{ containerID: 'old', ifname: 'x' }],
      }),
    );
    assert.deepEqual(p.calls[0]!.validAttachments, list);
    const none = recorder();
    await invokeInProcess(none, { CNI_COMMAND: 'GC', CNI_PATH: '/p' }, conf('1.1.0'));
    assert.equal(none.calls[0]!.validAttachments, undefined);
  });
  test('malformed attachments → code 7 naming the key', async () => {
    const r = await invokeInProcess(
      recorder(),
      { CNI_COMMAND: 'GC', CNI_PATH: '/p' },
      conf('1.1.0', { 'cni.dev/valid-attachments': [{ containerID: 5 }] }),
    );
    assert.deepEqual(parseErr(r.stdout), {
      code: 7,
      msg: 'cni.dev/valid-attachments[0].containerID: expected string, got number 5',
    });
  });
});

describe('same-namespace guard (before the handler)', () => {
  for (const cmd of ['ADD', 'DEL']) {
    test(`${cmd} with CNI_NETNS = own namespace → 8, handler not called`, async () => {
      const p = recorder();
      const r = await invokeInProcess(
        p,
        { ...FULL, CNI_COMMAND: cmd, CNI_NETNS: '/proc/self/ns/net' },
        conf(),
      );
      assert.equal(r.code, 1);
      assert.deepEqual(parseErr(r.stdout), {
        code: 8,
        msg: "plugin's netns and netns from CNI_NETNS should not be the same",
      });
      assert.equal(p.calls.length, 0);
    });
    for (const ov of ['1', 'true', 'TRUE', 'True']) {
      test(`${cmd} CNI_NETNS_OVERRIDE=${ov} skips the guard`, async () => {
        const p = recorder();
        const env = { ...FULL, CNI_COMMAND: cmd, CNI_NETNS: '/proc/self/ns/net', CNI_NETNS_OVERRIDE: ov };
        const r = await invokeInProcess(p, env, conf());
        assert.equal(r.code, 0, r.stdout);
        assert.equal(p.calls.length, 1);
      });
    }
    for (const ov of ['yes', '0', 'false', ' 1']) {
      test(`${cmd} CNI_NETNS_OVERRIDE=${JSON.stringify(ov)} does not skip it`, async () => {
        const env = { ...FULL, CNI_COMMAND: cmd, CNI_NETNS: '/proc/self/ns/net', CNI_NETNS_OVERRIDE: ov };
        const r = await invokeInProcess(recorder(), env, conf());
        assert.equal(parseErr(r.stdout).code, 8);
      });
    }
  }
  test('unopenable or different path: no error; DEL without netns is fine', async () => {
    for (const ns of ['/nonexistent', '/etc/hostname', '/proc/self/ns/uts']) {
      const r = await invokeInProcess(recorder(), { ...FULL, CNI_NETNS: ns }, conf());
      assert.equal(r.code, 0, r.stdout);
    }
    const env: Record<string, string> = { ...FULL, CNI_COMMAND: 'DEL' };
    delete env.CNI_NETNS;
    assert.equal((await invokeInProcess(recorder(), env, conf())).code, 0);
  });
  test('CHECK is not guarded; missing handler still guarded', async () => {
    const r = await invokeInProcess(
      recorder(),
      { ...FULL, CNI_COMMAND: 'CHECK', CNI_NETNS: '/proc/self/ns/net' },
      conf(),
    );
    assert.equal(r.code, 0, r.stdout);
    const bare: Plugin = { name: 'bare' };
    const d = await invokeInProcess(
      bare,
      { ...FULL, CNI_COMMAND: 'DEL', CNI_NETNS: '/proc/self/ns/net' },
      conf(),
    );
    assert.equal(parseErr(d.stdout).code, 8);
  });
  test("own namespace unreadable → 8 get plugin's netns failed", async () => {
    const saved = netnsGuard.selfPath;
    const savedFallback = netnsGuard.fallbackPath;
    netnsGuard.selfPath = '/nonexistent/self';
    netnsGuard.fallbackPath = '/nonexistent/self2';
    try {
      const r = await invokeInProcess(recorder(), { ...FULL, CNI_NETNS: '/proc/self/ns/net' }, conf());
      assert.deepEqual(parseErr(r.stdout), { code: 8, msg: "get plugin's netns failed" });
    } finally {
      netnsGuard.selfPath = saved;
      netnsGuard.fallbackPath = savedFallback;
    }
  });
});
