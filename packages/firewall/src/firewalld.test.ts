/** The pure-TypeScript D-Bus client: wire format, bus addresses (no bus needed; the real bus is in kernel tests). */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  addressSockets,
  busMayExist,
  type DBusArg,
  DBusConnection,
  DBusError,
  DEFAULT_SYSTEM_BUS_ADDRESS,
  marshalCall,
  messageLength,
  parseMessage,
  splitSignature,
  systemBusAddress,
} from './dbus.ts';
import { firewalldRunning, isFirewalldError } from './firewalld.ts';

describe('D-Bus wire format', () => {
  test('a method call: exact header bytes, length and round trip', () => {
    const buf = marshalCall({
      serial: 7,
      destination: 'org.fedoraproject.FirewallD1',
      path: '/org/fedoraproject/FirewallD1',
      interface: 'org.fedoraproject.FirewallD1.zone',
      member: 'addSource',
      signature: 'ss',
      args: ['trusted', '10.1.2.3/32'],
    });
    // 'l', METHOD_CALL, no flags, version 1; body = 4+8 ("trusted\0") + 4+12 ("10.1.2.3/32\0") = 28 bytes
    assert.deepEqual([...buf.subarray(0, 4)], [0x6c, 1, 0, 1]);
    assert.equal(buf.readUInt32LE(4), 28);
    assert.equal(buf.readUInt32LE(8), 7);
    assert.equal(messageLength(buf), buf.length);
    assert.equal(messageLength(buf.subarray(0, buf.length - 1)), 0, 'incomplete');
    assert.equal((buf.length - 28) % 8, 0, 'header padded to 8');
    const m = parseMessage(buf);
    assert.equal(m.type, 1);
    assert.equal(m.serial, 7);
    assert.equal(m.signature, 'ss');
    assert.deepEqual(m.body, ['trusted', '10.1.2.3/32']);
  });

  test('arrays, booleans, integers round trip with correct padding', () => {
    const args: DBusArg[] = [['a', 'bc', ''], true, 0xfffffffe, -5, 'x'];
    const buf = marshalCall({
      serial: 1,
      destination: 'd.e',
      path: '/',
      interface: 'i.f',
      member: 'M',
      signature: 'asbuis',
      args,
    });
    assert.deepEqual(parseMessage(buf).body, args);
    assert.throws(
      () =>
        marshalCall({
          serial: 1,
          destination: 'd',
          path: '/',
          interface: 'i',
          member: 'M',
          signature: 's',
          args: [],
        }),
      DBusError,
    );
    assert.throws(
      () =>
        marshalCall({
          serial: 1,
          destination: 'd',
          path: '/',
          interface: 'i',
          member: 'M',
          signature: 's',
          args: ['a\0b'],
        }),
      /NUL/,
    );
  });

  test('a big-endian reply built by hand (REPLY_SERIAL, SIGNATURE "b", body true)', () => {
    const buf = Buffer.from([
      0x42, 2, 0, 1, 0, 0, 0, 4, 0, 0, 0, 9, 0, 0, 0, 15, 5, 1, 0x75, 0, 0, 0, 0, 7, 8, 1, 0x67, 0, 1, 0x62,
      0, 0, 0, 0, 0, 1,
    ]);
    assert.equal(messageLength(buf), 36);
    const m = parseMessage(buf);
    assert.equal(m.type, 2);
    assert.equal(m.serial, 9);
    assert.equal(m.replySerial, 7);
    assert.equal(m.signature, 'b');
    assert.deepEqual(m.body, [true]);
    assert.throws(() => parseMessage(buf.subarray(0, 34)), /truncated/);
    assert.throws(() => messageLength(Buffer.alloc(16, 0x41)), /byte order/);
  });

  test('signatures', () => {
    assert.deepEqual(splitSignature('sas(ib)a{sv}v'), ['s', 'as', '(ib)', 'a{sv}', 'v']);
    assert.deepEqual(splitSignature(''), []);
    assert.throws(() => splitSignature('a'), /truncated/);
    assert.throws(() => splitSignature('(ii'), /unbalanced/);
    assert.throws(() => splitSignature('z'), /unsupported/);
  });
});

describe('bus address', () => {
  test('DBUS_SYSTEM_BUS_ADDRESS, else the standard socket; explicit address first', () => {
    assert.equal(systemBusAddress({ env: {} }), DEFAULT_SYSTEM_BUS_ADDRESS);
    assert.equal(systemBusAddress({ env: { DBUS_SYSTEM_BUS_ADDRESS: 'unix:path=/x' } }), 'unix:path=/x');
    assert.equal(
      systemBusAddress({ address: 'unix:path=/y', env: { DBUS_SYSTEM_BUS_ADDRESS: 'unix:path=/x' } }),
      'unix:path=/y',
    );
    assert.deepEqual(addressSockets('unix:path=/a%2cb,guid=12;tcp:host=h;unix:abstract=/tmp/d'), [
      '/a,b',
      '\0/tmp/d',
    ]);
  });

  test('a missing socket means no bus, without connecting', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-busaddr-'));
    try {
      const sock = join(dir, 'sock');
      assert.equal(busMayExist(`unix:path=${sock}`), false);
      assert.equal(await firewalldRunning({ address: `unix:path=${sock}` }), false);
      writeFileSync(sock, '');
      assert.equal(busMayExist(`unix:path=${sock}`), true);
      assert.equal(busMayExist(`unix:path=${join(dir, 'none')};unix:path=${sock}`), true, 'any alternative');
      assert.equal(busMayExist('unix:abstract=/tmp/dbus-x'), true, 'abstract sockets cannot be checked');
      assert.equal(busMayExist('tcp:host=localhost,port=1'), false, 'unsupported transport');
      assert.equal(busMayExist(''), false);
      assert.equal(
        await firewalldRunning({ address: `unix:path=${sock}` }),
        false,
        'not a socket: not running',
      );
      await assert.rejects(DBusConnection.connect({ address: `unix:path=${sock}` }), DBusError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a peer that refuses authentication or never answers gives a DBusError', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-busauth-'));
    const refuse = createServer((c) => c.once('data', () => c.write('REJECTED EXTERNAL\r\n')));
    const silent = createServer(() => undefined);
    try {
      await new Promise<void>((r) => refuse.listen(join(dir, 'refuse'), r));
      await new Promise<void>((r) => silent.listen(join(dir, 'silent'), r));
      await assert.rejects(
        DBusConnection.connect({ address: `unix:path=${join(dir, 'refuse')}` }),
        /authentication refused .*REJECTED EXTERNAL/,
      );
      await assert.rejects(
        DBusConnection.connect({ address: `unix:path=${join(dir, 'silent')}`, timeoutMs: 200 }),
        /no answer from the D-Bus .* within 200 ms/,
      );
      const e = new DBusError(
        'org.fedoraproject.FirewallD1.Exception',
        "ZONE_ALREADY_SET: '10.1.2.3/32' already bound",
      );
      assert.ok(isFirewalldError(e, 'ZONE_ALREADY_SET'));
      assert.ok(!isFirewalldError(e, 'ZONE_CONFLICT'));
      assert.ok(!isFirewalldError(new Error('ZONE_ALREADY_SET'), 'ZONE_ALREADY_SET'), 'only D-Bus errors');
      assert.equal(new DBusError('org.x.Failed', '').message, 'org.x.Failed', 'no text: the name');
    } finally {
      refuse.close();
      silent.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
