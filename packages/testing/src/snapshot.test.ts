import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { snapshotNetns } from './snapshot.ts';

describe('snapshotNetns sysctl names', () => {
  // Validation happens before the namespace is entered, so no root and no real namespace are needed.
  for (const bad of ['net/../../../etc/shadow', 'net.ipv4..ip_forward', '../etc/passwd', 'net//ipv4']) {
    test(`rejects ${JSON.stringify(bad)} (would leave /proc/sys)`, () => {
      assert.throws(
        () => snapshotNetns('/nonexistent-netns', { sections: ['sysctls'], sysctls: [bad] }),
        (e: Error & { errno?: number }) => e.errno === 22 && /invalid sysctl name/.test(e.message),
      );
    });
  }
});
