import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CniError, type Plugin } from '@cnikit/skel';
import { catchError, cniEnv, cniRunner, expectCniError, expectOk } from './cni.ts';

const echo: Plugin = {
  name: 'echo',
  about: 'echo test plugin',
  add(req) {
    if (req.args === 'FAIL=1') throw new CniError(7, 'asked to fail', 'details here');
    return { cniVersion: '1.1.0', interfaces: [{ name: req.ifName, sandbox: req.netns }] };
  },
  del() {},
};

test('cniEnv: container fields only for ADD/DEL/CHECK; overrides and removals applied last', () => {
  assert.deepEqual(cniEnv('GC', { containerId: 'x' }), { CNI_COMMAND: 'GC', CNI_PATH: '/usr/lib/cni' });
  assert.deepEqual(cniEnv('ADD', { args: 'A=1', env: { CNI_PATH: undefined, X: 'y' } }), {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'ctr1',
    CNI_NETNS: '',
    CNI_IFNAME: 'eth0',
    CNI_ARGS: 'A=1',
    X: 'y',
  });
});

test('cniRunner in-process: result JSON, defaults merged with per-call options, spec errors asserted', async () => {
  const cni = cniRunner(echo, { netns: '/run/netns/x', ifName: 'net1' });
  const conf = { cniVersion: '1.1.0', name: 'n', type: 'echo' };
  const ok = expectOk(await cni.add(conf, { ifName: 'net2' }));
  assert.deepEqual(ok.interfaces, [{ name: 'net2', sandbox: '/run/netns/x' }]);
  const e = expectCniError(await cni.add(conf, { args: 'FAIL=1' }), 7, 'asked to fail');
  assert.equal(e.details, 'details here');
  await assert.rejects(async () => expectCniError(await cni.add(conf)), /expected a CNI error/);
  assert.match((await catchError(() => Promise.reject(new Error('boom')))).message, /boom/);
});
