import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadArgs } from './args.ts';

const FIELDS = { IP: 'string', MAC: 'string', K8S_POD_NAME: 'string', Flag: 'bool' } as const;

describe('CNI_ARGS (Go types.LoadArgs)', () => {
  const ok: Array<[string, Record<string, unknown>]> = [
    ['', { IgnoreUnknown: false }],
    ['IP=10.0.0.2', { IgnoreUnknown: false, IP: '10.0.0.2' }],
    ['IP=10.0.0.2;MAC=aa:bb', { IgnoreUnknown: false, IP: '10.0.0.2', MAC: 'aa:bb' }],
    ['IP=1;IP=2', { IgnoreUnknown: false, IP: '2' }],
    ['IP=', { IgnoreUnknown: false, IP: '' }],
    ['IgnoreUnknown=1;FOO=bar', { IgnoreUnknown: true }],
    ['FOO=bar;IgnoreUnknown=true', { IgnoreUnknown: true }],
    ['IgnoreUnknown=TRUE;=x', { IgnoreUnknown: true }],
    ['IgnoreUnknown=0', { IgnoreUnknown: false }],
    ['IgnoreUnknown=False;IP=x', { IgnoreUnknown: false, IP: 'x' }],
    ['Flag=1', { IgnoreUnknown: false, Flag: true }],
    ['Flag=FALSE', { IgnoreUnknown: false, Flag: false }],
    ['IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=pod', { IgnoreUnknown: true, K8S_POD_NAME: 'pod' }],
  ];
  for (const [input, want] of ok) {
    test(`ok ${JSON.stringify(input)}`, () => assert.deepEqual(loadArgs(input, FIELDS), want));
  }
  const bad: Array<[string, string]> = [
    ['FOO', 'ARGS: invalid pair "FOO"'],
    ['A=b=c', 'ARGS: invalid pair "A=b=c"'],
    ['IP=1;', 'ARGS: invalid pair ""'],
    [';IP=1', 'ARGS: invalid pair ""'],
    ['FOO=1', 'ARGS: unknown args ["FOO=1"]'],
    ['A=1;B=2', 'ARGS: unknown args ["A=1" "B=2"]'],
    ['=x', 'ARGS: unknown args ["=x"]'],
    [' IP =1', 'ARGS: unknown args [" IP =1"]'],
    ['ip=1', 'ARGS: unknown args ["ip=1"]'],
    ['ignoreunknown=1;X=1', 'ARGS: unknown args ["ignoreunknown=1" "X=1"]'],
    [
      'IgnoreUnknown=yes',
      'ARGS: error parsing value of pair "IgnoreUnknown=yes": boolean unmarshal error: invalid input yes',
    ],
    [
      'IgnoreUnknown=YES',
      'ARGS: error parsing value of pair "IgnoreUnknown=YES": boolean unmarshal error: invalid input yes',
    ],
    ['Flag=2', 'ARGS: error parsing value of pair "Flag=2": boolean unmarshal error: invalid input 2'],
    ['X="q"', 'ARGS: unknown args ["X=\\"q\\""]'],
  ];
  for (const [input, msg] of bad) {
    test(`error ${JSON.stringify(input)}`, () =>
      assert.throws(() => loadArgs(input, FIELDS), { message: msg }));
  }
  test('custom field parser; its error is wrapped', () => {
    const parseIP = (t: string) => {
      if (!/^\d+\.\d+\.\d+\.\d+$/.test(t)) throw new Error(`invalid IP address: ${t}`);
      return t.split('.').map(Number);
    };
    const a = loadArgs('IP=10.0.0.1', { IP: parseIP });
    const ip: number[] | undefined = a.IP;
    assert.deepEqual(ip, [10, 0, 0, 1]);
    assert.throws(() => loadArgs('IP=x', { IP: parseIP }), {
      message: 'ARGS: error parsing value of pair "IP=x": invalid IP address: x',
    });
  });
  test('errors are plain errors (a handler turns them into 999)', () => {
    try {
      loadArgs('X', {});
      assert.fail('no throw');
    } catch (e) {
      assert.equal((e as { code?: unknown }).code, undefined);
    }
  });
});
