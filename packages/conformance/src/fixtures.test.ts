import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  expand,
  FixtureError,
  mergeFixtures,
  parseFixtures,
  parseHostLinkFlag,
  parseSkipFlag,
  vethPeer,
} from './fixtures.ts';

describe('fixtures', () => {
  test('--host-link NAME:TYPE[:CIDR,…], IPv6 included', () => {
    assert.deepEqual(parseHostLinkFlag('cfmpar0:dummy'), { name: 'cfmpar0', type: 'dummy' });
    assert.deepEqual(parseHostLinkFlag('br9:bridge:10.9.0.1/24,fd09::1/64'), {
      name: 'br9',
      type: 'bridge',
      addresses: ['10.9.0.1/24', 'fd09::1/64'],
    });
    for (const bad of [
      'eth0',
      ':dummy',
      'x:',
      'a-name-longer-than-15:dummy',
      'x:Dummy',
      'x:dummy:10.0.0.1',
      'x;y:dummy',
    ])
      assert.throws(() => parseHostLinkFlag(bad), FixtureError, bad);
  });

  test('--skip ID=WHY needs a known ID and a reason', () => {
    assert.deepEqual(parseSkipFlag('concurrency=one device'), ['concurrency', 'one device']);
    assert.throws(() => parseSkipFlag('concurrency'), /give the reason/);
    assert.throws(() => parseSkipFlag('concurrency= '), /give the reason/);
    assert.throws(() => parseSkipFlag('nope=x'), /unknown check ID "nope"/);
  });

  test('the fixtures file: every key checked, containerLink on a declared host link', () => {
    const ok = parseFixtures({
      hostLinks: [{ name: 'b0', type: 'bridge', addresses: ['10.1.0.1/24'] }],
      containerLink: { master: 'b0' },
      daemons: [{ argv: ['{plugin}', 'daemon'], readyPath: '/run/cni/dhcp.sock' }],
      skip: { concurrency: ' one device ' },
    });
    assert.deepEqual(ok.skip, { concurrency: 'one device' });
    assert.deepEqual(ok.daemons, [{ argv: ['{plugin}', 'daemon'], readyPath: '/run/cni/dhcp.sock' }]);
    const bad: Array<[unknown, RegExp]> = [
      [[], /not a JSON object/],
      [{ links: [] }, /unknown key\(s\) links/],
      [{ hostLinks: {} }, /"hostLinks" must be a list/],
      [{ hostLinks: [{ name: 'b0', type: 'bridge', mtu: 9000 }] }, /unknown key\(s\) mtu/],
      [{ hostLinks: [{ name: 'b0', type: 'bridge', addresses: ['10.0.0.1'] }] }, /list of CIDRs/],
      [
        {
          hostLinks: [
            { name: 'b0', type: 'bridge' },
            { name: 'b0', type: 'dummy' },
          ],
        },
        /b0 is declared twice/,
      ],
      [{ containerLink: { master: 'b0' } }, /is not one of hostLinks/],
      [{ hostLinks: [{ name: 'b0', type: 'bridge' }], containerLink: 'b0' }, /must be \{"master"/],
      [{ daemons: [{ argv: 'dnsmasq -d' }] }, /non-empty list of strings \(no shell\)/],
      [{ daemons: [{ argv: [] }] }, /non-empty list of strings/],
      [{ daemons: [{ argv: ['x'], readyPath: 'relative' }] }, /absolute path/],
      [{ skip: { 'del.twice': '' } }, /skip\.del\.twice: give the reason/],
      [{ skip: { 'no.such': 'x' } }, /unknown check ID "no\.such"/],
    ];
    for (const [raw, re] of bad) assert.throws(() => parseFixtures(raw), re, JSON.stringify(raw));
  });

  test('merge (file, then flags), {plugin}/{dir} expansion, veth peer names', () => {
    const m = mergeFixtures(
      { hostLinks: [{ name: 'b0', type: 'bridge' }], skip: { concurrency: 'a' } },
      {
        hostLinks: [{ name: 'd0', type: 'dummy' }],
        containerLink: { master: 'b0' },
        skip: { determinism: 'b' },
      },
    );
    assert.deepEqual(
      m.hostLinks?.map((h) => h.name),
      ['b0', 'd0'],
    );
    assert.deepEqual(m.skip, { concurrency: 'a', determinism: 'b' });
    assert.throws(
      () =>
        mergeFixtures(
          { hostLinks: [{ name: 'b0', type: 'bridge' }] },
          { hostLinks: [{ name: 'b0', type: 'dummy' }] },
        ),
      /twice/,
    );
    assert.equal(expand('{plugin} --dir={dir}/x', { plugin: '/p/dhcp', dir: '/t' }), '/p/dhcp --dir=/t/x');
    assert.equal(vethPeer('cfmdev0'), 'cfmdev0p');
    assert.equal(vethPeer('abcdefghijklmno'), 'abcdefghijklmnp');
  });
});
