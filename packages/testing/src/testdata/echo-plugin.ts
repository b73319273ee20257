/** A tiny plugin for the fixture's own tests (cni.test.ts): run in-process and as a `{ source }` process. */
import { CniError, type Plugin } from '@cnikit/skel';

export const echo: Plugin = {
  name: 'echo',
  about: 'echo test plugin',
  add(req) {
    if (req.args === 'FAIL=1') throw new CniError(7, 'asked to fail', 'details here');
    if (req.args === 'HANG=1') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 30_000);
    return { cniVersion: '1.1.0', interfaces: [{ name: req.ifName, sandbox: req.netns }] };
  },
  del() {},
};
