import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findSandboxInterface, validateContainerInterface } from '@cnikit/link';
import { CniError } from '@cnikit/skel';
import { type MacvlanLinkView, macvlanLinkCheck } from './check-logic.ts';
import { macBytes, modeFromString, parseConf } from './config.ts';

const add = { command: 'ADD' as const, args: '' };

describe('macvlan parseConf', () => {
  test('defaults: master from the default route, mode bridge, kernel MTU, no MAC, L2 only', () => {
    const c = parseConf({ cniVersion: '1.0.0', name: 'n', type: 'macvlan' }, add);
    assert.deepEqual(c, {
      cniVersion: '1.0.0',
      name: 'n',
      master: '',
      mode: '',
      mtu: 0,
      mac: '',
      linkInContainer: false,
      bcQueueLen: 0,
      ipamType: '',
      dns: undefined,
    });
  });
  test('every key', () => {
    const c = parseConf(
      {
        name: 'n',
        master: 'eth1',
        mode: 'vepa',
        mtu: 1400,
        mac: '02:00:00:00:00:01',
        linkInContainer: true,
        bcqueuelen: 100,
        ipam: { type: 'static' },
        dns: { nameservers: ['10.0.0.10'] },
      },
      add,
    );
    assert.equal(c.master, 'eth1');
    assert.equal(c.mode, 'vepa');
    assert.equal(c.mtu, 1400);
    assert.equal(c.mac, '02:00:00:00:00:01');
    assert.equal(c.linkInContainer, true);
    assert.equal(c.bcQueueLen, 100);
    assert.equal(c.ipamType, 'static');
    assert.deepEqual(c.dns, { nameservers: ['10.0.0.10'] });
  });
  test('MAC: config, then CNI_ARGS MAC, then runtimeConfig.mac (ADD and CHECK only read CNI_ARGS)', () => {
    const raw = { mac: '02:00:00:00:00:01' };
    assert.equal(parseConf(raw, add).mac, '02:00:00:00:00:01');
    assert.equal(
      parseConf(raw, { command: 'ADD', args: 'IgnoreUnknown=1;MAC=02:00:00:00:00:02;K8S_POD_NAME=x' }).mac,
      '02:00:00:00:00:02',
    );
    assert.equal(
      parseConf(raw, { command: 'CHECK', args: 'MAC=02:00:00:00:00:02' }).mac,
      '02:00:00:00:00:02',
    );
    assert.equal(
      parseConf(
        { ...raw, runtimeConfig: { mac: '02:00:00:00:00:03' } },
        { command: 'ADD', args: 'MAC=02:00:00:00:00:02' },
      ).mac,
      '02:00:00:00:00:03',
    );
    // DEL ignores CNI_ARGS (even a bad one), like the reference's DEL
    assert.equal(parseConf(raw, { command: 'DEL', args: 'BOGUS' }).mac, '02:00:00:00:00:01');
    // the reference's macvlan does not read args.cni.mac
    assert.equal(parseConf({ args: { cni: { mac: '02:00:00:00:00:09' } } }, add).mac, '');
  });
  test('bad CNI_ARGS: the reference LoadArgs messages', () => {
    assert.throws(
      () => parseConf({}, { command: 'ADD', args: 'FOO=bar' }),
      /ARGS: unknown args \["FOO=bar"\]/,
    );
    assert.throws(() => parseConf({}, { command: 'ADD', args: 'MAC' }), /ARGS: invalid pair "MAC"/);
  });
  test('type errors: "failed to load netconf" (DEL: "netConf"), code 6 or 7', () => {
    const bad = (raw: unknown, command: 'ADD' | 'DEL', re: RegExp) =>
      assert.throws(
        () => parseConf(raw, { command, args: '' }),
        (e: unknown) => e instanceof CniError && (e.code === 6 || e.code === 7) && re.test(e.msg),
      );
    bad({ mtu: '1500' }, 'ADD', /^failed to load netconf: .*mtu/);
    bad({ mtu: 1500.5 }, 'ADD', /^failed to load netconf: /);
    bad({ bcqueuelen: -1 }, 'ADD', /^failed to load netconf: .*bcqueuelen/);
    bad({ bcqueuelen: 2 ** 32 }, 'ADD', /^failed to load netconf: .*bcqueuelen/);
    bad({ linkInContainer: 'yes' }, 'ADD', /^failed to load netconf: /);
    bad({ master: 5 }, 'DEL', /^failed to load netConf: .*master/);
  });
});

describe('macvlan modes, MTU and MAC', () => {
  test('modeFromString', () => {
    assert.equal(modeFromString(''), 'bridge');
    assert.equal(modeFromString('bridge'), 'bridge');
    assert.equal(modeFromString('private'), 'private');
    assert.equal(modeFromString('vepa'), 'vepa');
    assert.equal(modeFromString('passthru'), 'passthru');
    assert.throws(() => modeFromString('source'), { message: 'unknown macvlan mode: "source"' });
    assert.throws(() => modeFromString('Bridge'), { message: 'unknown macvlan mode: "Bridge"' });
  });
  test('macBytes: the reference message for a bad MAC', () => {
    assert.equal(macBytes(''), undefined);
    assert.equal(macBytes('02:00:00:00:00:01'), '02:00:00:00:00:01');
    assert.throws(() => macBytes('02:00'), {
      message: 'invalid args 02:00 for MAC addr: address 02:00: invalid MAC address',
    });
  });
});

describe('macvlan CHECK logic', () => {
  const link = (o: Partial<MacvlanLinkView> = {}): MacvlanLinkView => ({
    name: 'eth0',
    kind: 'macvlan',
    mac: '02:00:00:00:00:01',
    macvlan: { mode: 'bridge' },
    ...o,
  });
  const intf = { name: 'eth0', mac: '02:00:00:00:00:01', sandbox: '/run/netns/c' };
  test('a matching interface passes', () => {
    validateContainerInterface(intf, macvlanLinkCheck(''), () => link());
    validateContainerInterface({ name: 'eth0', sandbox: '/x' }, macvlanLinkCheck('bridge'), () =>
      link({ mac: '02:99:00:00:00:01' }),
    );
  });
  test('each mismatch with the reference message', () => {
    const fails = (i: typeof intf, mode: string, l: MacvlanLinkView | undefined, msg: string) =>
      assert.throws(() => validateContainerInterface(i, macvlanLinkCheck(mode), () => l), { message: msg });
    fails({ ...intf, name: '' }, '', link(), 'container interface name missing in prevResult: ');
    fails(intf, '', undefined, 'container Interface name in prevResult: eth0 not found');
    fails(
      { ...intf, sandbox: '' },
      '',
      link(),
      'error: Container interface eth0 should not be in host namespace',
    );
    fails(
      intf,
      '',
      link({ kind: 'veth', macvlan: undefined }),
      'error: Container interface eth0 not of type macvlan',
    );
    fails(intf, 'vepa', link(), 'container macvlan mode bridge does not match expected value: vepa');
    fails(intf, 'nope', link(), 'unknown macvlan mode: "nope"');
    fails(
      intf,
      '',
      link({ mac: '02:00:00:00:00:09' }),
      "interface eth0 Mac 02:00:00:00:00:01 doesn't match container Mac: 02:00:00:00:00:09",
    );
  });
  test('findSandboxInterface: by name and sandbox, lower-case message otherwise', () => {
    const ifs = [
      { name: 'eth0', sandbox: '/a' },
      { name: 'eth0', sandbox: '/b' },
    ];
    assert.equal(findSandboxInterface(ifs, 'eth0', '/b', true), ifs[1]);
    assert.throws(() => findSandboxInterface(ifs, 'eth1', '/b', true), {
      message: "sandbox in prevResult  doesn't match configured netns: /b",
    });
    assert.throws(() => findSandboxInterface(undefined, 'eth0', '/b', true), /sandbox in prevResult/);
  });
});
