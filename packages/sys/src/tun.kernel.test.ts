// netnsNew and tunCreate on the real kernel, inside a private namespace.
import assert from 'node:assert/strict';
import { closeSync, fstatSync, statSync } from 'node:fs';
import { describe, test } from 'node:test';
import { listLinks, withNetns } from '@cnikit/netlink';
import { sandboxForFile } from '@cnikit/testing';
import {
  CLONE_NEWNET,
  IFF_MULTI_QUEUE,
  IFF_NO_PI,
  IFF_TAP,
  IFF_VNET_HDR,
  netnsNew,
  nsType,
  tunCreate,
} from './index.ts';

const env = sandboxForFile({ containers: 1 });

describe('sys: netnsNew / tunCreate', () => {
  test("netnsNew: a namespace other than the caller's, the caller stays where it was", () => {
    const before = statSync('/proc/thread-self/ns/net').ino;
    const fd = netnsNew();
    try {
      assert.equal(nsType(fd), CLONE_NEWNET);
      assert.notEqual(fstatSync(fd).ino, before);
      assert.equal(statSync('/proc/thread-self/ns/net').ino, before);
      // a fresh namespace has only lo
      const links = withNetns(`/proc/self/fd/${fd}`, () => listLinks().map((l) => l.name));
      assert.deepEqual(links, ['lo']);
    } finally {
      closeSync(fd);
    }
  });

  test('tunCreate: a persistent tap with owner, group, vnet header and multiple queues', () => {
    const name = withNetns(env.sb.container.path, () =>
      tunCreate('tapt0', IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE, 1234, 2345),
    );
    assert.equal(name, 'tapt0');
    const l = JSON.parse(
      env.sb.exec('ip', ['-d', '-j', 'link', 'show', 'tapt0'], { ns: 'container' }).stdout,
    )[0];
    assert.equal(l.linkinfo.info_kind, 'tun');
    const d = l.linkinfo.info_data;
    assert.equal(d.type, 'tap');
    assert.equal(d.user, 1234);
    assert.equal(d.group, 2345);
    assert.equal(d.multi_queue, true);
    assert.equal(d.vnet_hdr, true);
    assert.equal(d.persist, true);
    assert.throws(
      () => withNetns(env.sb.container.path, () => tunCreate('tapt0', IFF_TAP | IFF_NO_PI, -1, -1)),
      (e: NodeJS.ErrnoException) => e.code === 'EBUSY' || e.code === 'EEXIST' || e.code === 'EINVAL',
    );
    assert.throws(() => tunCreate('x'.repeat(16), IFF_TAP, -1, -1), /EINVAL|invalid argument/);
  });
});
