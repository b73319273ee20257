import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError, invokeInProcess, type Plugin } from '@cnikit/skel';
import {
  cniErrorText,
  DEFAULT_SOCKET,
  decodeHello,
  decodeReply,
  decodeRequest,
  decodeStdin,
  encodeFrame,
  encodeHello,
  encodeReply,
  encodeRequest,
  encodeStdin,
  FRAME_HEADER,
  FrameReader,
  HELLO_LENGTH,
  isForwarded,
  MAX_FRAME,
  ProtocolError,
  T_NEED_STDIN,
  T_REPLY,
  T_REQUEST,
  T_STDIN,
} from './protocol.ts';
import { DEFAULT_DEADLINE_MS, parseServeArgs } from './serve.ts';
import { systemdUnits } from './systemd.ts';

describe('warm protocol', () => {
  test('hello: 16 bytes, magic, version, pid and deadline little-endian', () => {
    const b = encodeHello({ version: 1, pid: 0x01020304, deadlineMs: 120000 });
    assert.equal(b.length, HELLO_LENGTH);
    assert.equal(b.toString('latin1', 0, 4), 'CNKW');
    assert.deepEqual([...b.subarray(4, 12)], [1, 0, 0, 0, 4, 3, 2, 1]);
    assert.deepEqual(decodeHello(b), { version: 1, pid: 0x01020304, deadlineMs: 120000 });
    assert.throws(
      () => decodeHello(Buffer.from('NOPE0000000000000000', 'latin1').subarray(0, 16)),
      ProtocolError,
    );
    assert.throws(() => decodeHello(b.subarray(0, 15)), ProtocolError);
  });

  test('request round trip; only forwarded variables survive decoding', () => {
    const frame = encodeRequest({
      flags: 1,
      name: 'bridge',
      env: {
        CNI_COMMAND: 'ADD',
        CNIKIT_LOG_LEVEL: 'debug',
        TRACEPARENT: '00-ab',
        PATH: '/evil',
        LD_PRELOAD: '/x.so',
      },
    });
    assert.equal(frame[0], T_REQUEST);
    assert.equal(frame.readUInt32LE(4), frame.length - FRAME_HEADER);
    const r = decodeRequest(frame.subarray(FRAME_HEADER));
    assert.deepEqual(r, {
      flags: 1,
      name: 'bridge',
      env: { CNI_COMMAND: 'ADD', CNIKIT_LOG_LEVEL: 'debug', TRACEPARENT: '00-ab' },
    });
    assert.ok(isForwarded('CNI_NETNS_OVERRIDE') && isForwarded('TRACESTATE') && !isForwarded('HOME'));
  });

  test('malformed requests are protocol errors', () => {
    const body = encodeRequest({ flags: 0, name: 'x', env: { CNI_A: '1' } }).subarray(FRAME_HEADER);
    assert.throws(() => decodeRequest(body.subarray(0, body.length - 1)), /truncated environment entry/);
    assert.throws(() => decodeRequest(Buffer.concat([body, Buffer.from([0])])), /trailing bytes/);
    const noEq = Buffer.alloc(4 + 4 + 4 + 4 + 3);
    noEq.writeUInt32LE(1, 8);
    noEq.writeUInt32LE(3, 12);
    noEq.write('ABC', 16);
    assert.throws(() => decodeRequest(noEq), /malformed environment entry/);
  });

  test('stdin and reply frames', () => {
    const s = encodeStdin(0, Buffer.from('{"a":1}'));
    assert.equal(s[0], T_STDIN);
    assert.deepEqual(decodeStdin(s.subarray(FRAME_HEADER)), { errno: 0, data: Buffer.from('{"a":1}') });
    assert.equal(decodeStdin(encodeStdin(9).subarray(FRAME_HEADER)).errno, 9);
    const r = encodeReply({ code: 1, stdout: Buffer.from('out'), stderr: Buffer.from('err!') });
    assert.equal(r[0], T_REPLY);
    const d = decodeReply(r.subarray(FRAME_HEADER));
    assert.equal(d.code, 1);
    assert.equal(Buffer.from(d.stdout).toString(), 'out');
    assert.equal(Buffer.from(d.stderr).toString(), 'err!');
    assert.throws(() => decodeReply(r.subarray(FRAME_HEADER, r.length - 1)), ProtocolError);
  });

  test('FrameReader reassembles frames split at any byte and rejects oversized ones', () => {
    const a = encodeFrame(T_NEED_STDIN);
    const b = encodeReply({ code: 0, stdout: Buffer.alloc(1000, 65), stderr: Buffer.alloc(0) });
    const all = Buffer.concat([a, b, a]);
    for (const step of [1, 3, 7, 500, all.length]) {
      const fr = new FrameReader();
      const got: number[] = [];
      for (let off = 0; off < all.length; off += step)
        got.push(...fr.push(all.subarray(off, off + step)).map((f) => f.type));
      assert.deepEqual(got, [T_NEED_STDIN, T_REPLY, T_NEED_STDIN], `step ${step}`);
      assert.equal(fr.pending, 0);
    }
    const big = Buffer.alloc(FRAME_HEADER);
    big[0] = T_REPLY;
    big.writeUInt32LE(MAX_FRAME + 1, 4);
    assert.throws(() => new FrameReader().push(big), /exceeds the limit/);
  });

  test('cniErrorText is byte-identical to the error object the dispatcher prints', async () => {
    const plugin: Plugin = {
      name: 'boom',
      add: () => {
        throw new CniError(11, 'a <busy> & "quoted" thing', 'details here');
      },
    };
    const r = await invokeInProcess(
      plugin,
      { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c', CNI_NETNS: '/x', CNI_IFNAME: 'eth0', CNI_PATH: '/x' },
      '{"cniVersion":"1.0.0","name":"n"}',
    );
    assert.equal(r.code, 1);
    assert.equal(r.stdout, cniErrorText(11, 'a <busy> & "quoted" thing', 'details here'));
    assert.equal(cniErrorText(5, 'm'), '{\n    "code": 5,\n    "msg": "m"\n}');
  });
});

describe('cnikit serve arguments', () => {
  test('defaults, environment and flags', () => {
    assert.deepEqual(parseServeArgs([], {}), {
      socket: DEFAULT_SOCKET,
      check: false,
      deadlineMs: DEFAULT_DEADLINE_MS,
      verbose: false,
      metrics: { kind: 'unix', path: '/run/cnikit/metrics.sock' },
    });
    assert.equal(
      (parseServeArgs([], { CNIKIT_SOCKET: '/tmp/x.sock' }) as { socket: string }).socket,
      '/tmp/x.sock',
    );
    assert.deepEqual(parseServeArgs(['--socket=/a/b.sock', '--check', '--deadline-ms', '500', '-v'], {}), {
      socket: '/a/b.sock',
      check: true,
      deadlineMs: 500,
      verbose: true,
      metrics: { kind: 'unix', path: '/a/metrics.sock' },
    });
    // metrics: the flag, else CNIKIT_METRICS_ADDRESS, else metrics.sock beside the socket; off: none
    const metrics = (args: string[], env: Record<string, string> = {}) =>
      (parseServeArgs(args, env) as { metrics?: unknown; metricsArg?: string }).metrics;
    assert.deepEqual(metrics(['--metrics', ':9743']), { kind: 'tcp', host: '::', port: 9743 });
    assert.deepEqual(metrics(['--metrics=127.0.0.1:1']), { kind: 'tcp', host: '127.0.0.1', port: 1 });
    assert.deepEqual(metrics([], { CNIKIT_METRICS_ADDRESS: '/m.sock' }), { kind: 'unix', path: '/m.sock' });
    assert.deepEqual(metrics(['--metrics', ':1'], { CNIKIT_METRICS_ADDRESS: '/m.sock' }), {
      kind: 'tcp',
      host: '::',
      port: 1,
    });
    assert.equal(metrics(['--metrics', 'off']), undefined);
    assert.equal(parseServeArgs(['--help'], {}), 'help');
  });

  test('bad arguments name the problem', () => {
    assert.match((parseServeArgs(['--socket', 'rel.sock'], {}) as { error: string }).error, /absolute path/);
    assert.match((parseServeArgs(['--socket'], {}) as { error: string }).error, /needs a path/);
    assert.match((parseServeArgs(['--deadline-ms', '5'], {}) as { error: string }).error, /between 100 and/);
    assert.match((parseServeArgs(['--deadline-ms=abc'], {}) as { error: string }).error, /"abc"/);
    assert.match(
      (parseServeArgs(['--frobnicate'], {}) as { error: string }).error,
      /unknown argument "--frobnicate"/,
    );
    assert.match((parseServeArgs(['--metrics'], {}) as { error: string }).error, /needs an address/);
    assert.match(
      (parseServeArgs(['--metrics', '9743'], {}) as { error: string }).error,
      /--metrics must be HOST:PORT, :PORT, an absolute socket path or off, got "9743"/,
    );
    assert.match(
      (parseServeArgs([], { CNIKIT_METRICS_ADDRESS: 'x' }) as { error: string }).error,
      /--metrics must be/,
    );
  });

  test('the hosted dhcp daemon: --dhcp-daemon, --dhcp-daemon-flags, else CNIKIT_DHCP_DAEMON(_FLAGS)', () => {
    const dhcp = (args: string[], env: Record<string, string> = {}) =>
      (parseServeArgs(args, env) as { dhcpDaemon?: string[] }).dhcpDaemon;
    assert.equal(dhcp([]), undefined);
    assert.deepEqual(dhcp(['--dhcp-daemon']), []);
    assert.deepEqual(dhcp(['--dhcp-daemon-flags', ' -socketpath /run/x.sock  -timeout 5s ']), [
      '-socketpath',
      '/run/x.sock',
      '-timeout',
      '5s',
    ]);
    assert.deepEqual(dhcp(['--dhcp-daemon-flags=-broadcast']), ['-broadcast']);
    assert.deepEqual(dhcp([], { CNIKIT_DHCP_DAEMON: 'on' }), []);
    assert.deepEqual(dhcp([], { CNIKIT_DHCP_DAEMON: '1', CNIKIT_DHCP_DAEMON_FLAGS: '-resendmax 2s' }), [
      '-resendmax',
      '2s',
    ]);
    assert.deepEqual(dhcp([], { CNIKIT_DHCP_DAEMON_FLAGS: '-broadcast' }), ['-broadcast']);
    assert.equal(dhcp([], { CNIKIT_DHCP_DAEMON: 'off', CNIKIT_DHCP_DAEMON_FLAGS: '-broadcast' }), undefined);
    assert.equal(dhcp([], { CNIKIT_DHCP_DAEMON: '' }), undefined);
    // the command line wins over the environment
    assert.deepEqual(dhcp(['--dhcp-daemon'], { CNIKIT_DHCP_DAEMON_FLAGS: '-broadcast' }), []);
    assert.match(
      (parseServeArgs([], { CNIKIT_DHCP_DAEMON: 'maybe' }) as { error: string }).error,
      /CNIKIT_DHCP_DAEMON must be 1\/true\/on\/yes or 0\/false\/off\/no, got "maybe"/,
    );
    assert.match(
      (parseServeArgs(['--dhcp-daemon-flags'], {}) as { error: string }).error,
      /--dhcp-daemon-flags needs the `dhcp daemon` flags/,
    );
  });
});

describe('systemd units', () => {
  test('socket unit: root 0600 socket in a 0700 directory; service runs cnikit serve', () => {
    const u = systemdUnits({
      exe: '/opt/cni/bin/cnikit',
      socket: '/run/cnikit/cnikit.sock',
      deadlineMs: 9000,
    });
    const sock = u['cnikit.socket'] as string;
    const svc = u['cnikit.service'] as string;
    for (const line of [
      'ListenStream=/run/cnikit/cnikit.sock',
      'SocketMode=0600',
      'DirectoryMode=0700',
      'SocketUser=root',
    ]) {
      assert.ok(sock.split('\n').includes(line), line);
    }
    assert.ok(
      svc
        .split('\n')
        .includes('ExecStart=/opt/cni/bin/cnikit serve --socket /run/cnikit/cnikit.sock --deadline-ms 9000'),
    );
    assert.ok(svc.split('\n').includes('Restart=always'));
    assert.ok(svc.split('\n').includes('Requires=cnikit.socket'));
  });

  test('paths systemd would split or expand are refused', () => {
    assert.throws(() => systemdUnits({ exe: '/opt/my cni/cnikit', socket: '/run/x.sock' }), /without spaces/);
    assert.throws(() => systemdUnits({ exe: 'cnikit', socket: '/run/x.sock' }), /absolute path/);
    assert.throws(() => systemdUnits({ exe: '/opt/cnikit', socket: '/run/%i.sock' }), /%/);
  });
});
