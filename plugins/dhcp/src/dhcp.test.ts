/** Unit tests without root: message codec, option encodings, configuration, flags and the socket protocol. */
import assert from 'node:assert/strict';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { backoffDelays, leaseTimes } from './client.ts';
import { attach, DhcpDaemon, parseDaemonFlags, parseGoDuration } from './daemon.ts';
import { type LeaseRecord, LeaseStore, leaseFileName } from './lease.ts';
import {
  DEFAULT_REQUESTED,
  generateClientId,
  parseCniArgs,
  parseOptionName,
  prepareOptions,
  readIpamConfig,
  resultFromAck,
} from './options.ts';
import {
  BOOTREPLY,
  type DhcpMessage,
  decodeClasslessRoutes,
  decodeDomainSearch,
  decodeMessage,
  decodeStaticRoutes,
  encodeClasslessRoutes,
  encodeDomainSearch,
  encodeMessage,
  MessageType,
  maskToPrefix,
  Opt,
  PacketError,
} from './packet.ts';
import { callDaemon, GO_RPC_REFUSAL } from './protocol.ts';

function ack(opts: Array<[number, number[] | Uint8Array]>, yiaddr = '192.0.2.10'): DhcpMessage {
  const options = new Map<number, Uint8Array>([[Opt.MESSAGE_TYPE, Uint8Array.of(MessageType.ACK)]]);
  for (const [k, v] of opts) options.set(k, Uint8Array.from(v));
  return {
    op: BOOTREPLY,
    htype: 1,
    hlen: 6,
    hops: 0,
    xid: 0xdeadbeef,
    secs: 0,
    flags: 0,
    ciaddr: '0.0.0.0',
    yiaddr,
    siaddr: '0.0.0.0',
    giaddr: '0.0.0.0',
    chaddr: Uint8Array.of(2, 0, 0, 0, 0, 1),
    options,
  };
}

test('messages round-trip; at least 300 bytes; long options split in 255-byte pieces and joined again', () => {
  const m = ack([
    [Opt.SUBNET_MASK, [255, 255, 255, 0]],
    [Opt.HOST_NAME, [...Buffer.alloc(300, 'h')]],
  ]);
  const buf = encodeMessage(m);
  assert.ok(buf.length >= 300);
  assert.equal(buf.readUInt32BE(236), 0x63825363);
  const back = decodeMessage(buf);
  assert.equal(back.xid, 0xdeadbeef);
  assert.equal(back.yiaddr, '192.0.2.10');
  assert.deepEqual([...back.chaddr], [2, 0, 0, 0, 0, 1]);
  assert.equal(back.options.get(Opt.HOST_NAME)?.length, 300);
  assert.deepEqual([...(back.options.get(Opt.SUBNET_MASK) ?? [])], [255, 255, 255, 0]);
});

test('malformed messages are refused', () => {
  assert.throws(() => decodeMessage(new Uint8Array(100)), PacketError);
  const buf = encodeMessage(ack([]));
  buf.writeUInt32BE(0, 236);
  assert.throws(() => decodeMessage(buf), /no DHCP magic cookie/);
  const trunc = encodeMessage(ack([]));
  trunc[240] = Opt.HOST_NAME;
  trunc[241] = 250; // runs past the end
  assert.throws(() => decodeMessage(trunc.subarray(0, 260)), /runs past the end/);
});

test('option overload: options continued in the file field are read', () => {
  const buf = encodeMessage(ack([[Opt.OVERLOAD, [1]]]));
  buf.set([Opt.ROUTER, 4, 192, 0, 2, 1, Opt.END], 108);
  assert.deepEqual([...(decodeMessage(buf).options.get(Opt.ROUTER) ?? [])], [192, 0, 2, 1]);
});

test('option 121 (RFC 3442) encodes and decodes; bad widths are refused', () => {
  const routes = [
    { dst: '10.0.0.0/8', gw: '192.0.2.1' },
    { dst: '198.51.100.0/25', gw: '0.0.0.0' },
    { dst: '0.0.0.0/0', gw: '192.0.2.254' },
  ];
  const enc = encodeClasslessRoutes(routes);
  assert.deepEqual([...enc.subarray(0, 6)], [8, 10, 192, 0, 2, 1]);
  assert.deepEqual(decodeClasslessRoutes(enc), routes);
  assert.throws(() => decodeClasslessRoutes(Uint8Array.of(33, 1, 2, 3, 4, 5, 6, 7, 8)), /exceeds 32/);
  assert.throws(() => decodeClasslessRoutes(Uint8Array.of(24, 10, 0)), /truncated/);
});

test('option 33 destinations are classful; a trailing partial pair is ignored', () => {
  const v = Uint8Array.of(
    10,
    1,
    2,
    3,
    192,
    0,
    2,
    1,
    172,
    16,
    5,
    0,
    192,
    0,
    2,
    2,
    192,
    168,
    7,
    0,
    192,
    0,
    2,
    3,
    1,
  );
  assert.deepEqual(decodeStaticRoutes(v), [
    { dst: '10.0.0.0/8', gw: '192.0.2.1' },
    { dst: '172.16.0.0/16', gw: '192.0.2.2' },
    { dst: '192.168.7.0/24', gw: '192.0.2.3' },
  ]);
});

test('option 119 search lists with compression pointers; loops are refused', () => {
  assert.deepEqual(decodeDomainSearch(encodeDomainSearch(['corp.test', 'lab.test'])), [
    'corp.test',
    'lab.test',
  ]);
  // "eng.corp.test" then "corp.test" as a pointer to offset 4
  const v = Uint8Array.of(3, 101, 110, 103, 4, 99, 111, 114, 112, 4, 116, 101, 115, 116, 0, 0xc0, 4);
  assert.deepEqual(decodeDomainSearch(v), ['eng.corp.test', 'corp.test']);
  assert.throws(() => decodeDomainSearch(Uint8Array.of(0xc0, 0)), /bad compression pointer/);
});

test('netmask to prefix; non-contiguous masks are refused', () => {
  assert.equal(maskToPrefix('255.255.255.0'), 24);
  assert.equal(maskToPrefix('255.255.255.255'), 32);
  assert.equal(maskToPrefix('0.0.0.0'), 0);
  assert.equal(maskToPrefix('255.0.255.0'), undefined);
});

test('result: routes from option 121 replace option 33 and the router; on-link routes get scope link', () => {
  const r = resultFromAck(
    ack([
      [Opt.SUBNET_MASK, [255, 255, 255, 0]],
      [Opt.ROUTER, [192, 0, 2, 1]],
      [Opt.STATIC_ROUTES, [10, 0, 0, 0, 192, 0, 2, 9]],
      [
        Opt.CLASSLESS_ROUTES,
        encodeClasslessRoutes([
          { dst: '10.1.0.0/16', gw: '192.0.2.5' },
          { dst: '203.0.113.0/24', gw: '0.0.0.0' },
        ]),
      ],
    ]),
    0,
  );
  assert.deepEqual(r.ips, [{ address: '192.0.2.10/24', gateway: '192.0.2.1' }]);
  assert.deepEqual(r.routes, [
    { dst: '10.1.0.0/16', gw: '192.0.2.5' },
    { dst: '203.0.113.0/24', gw: '0.0.0.0', scope: 253 },
  ]);
  assert.equal(r.dns, undefined);
});

test('result: option 33 then the default route via the router; priority on every route; DNS options', () => {
  const r = resultFromAck(
    ack([
      [Opt.SUBNET_MASK, [255, 255, 0, 0]],
      [Opt.ROUTER, [192, 0, 2, 1, 192, 0, 2, 2]],
      [Opt.STATIC_ROUTES, [10, 0, 0, 0, 192, 0, 2, 9]],
      [Opt.DNS, [192, 0, 2, 53]],
      [Opt.DOMAIN_NAME, [...Buffer.from('corp.test\0')]],
      [Opt.DOMAIN_SEARCH, encodeDomainSearch(['corp.test'])],
    ]),
    100,
  );
  assert.deepEqual(r.ips, [{ address: '192.0.2.10/16', gateway: '192.0.2.1' }]);
  assert.deepEqual(r.routes, [
    { dst: '10.0.0.0/8', gw: '192.0.2.9', priority: 100 },
    { dst: '0.0.0.0/0', gw: '192.0.2.1', priority: 100 },
  ]);
  assert.deepEqual(r.dns, { nameservers: ['192.0.2.53'], domain: 'corp.test', search: ['corp.test'] });
});

test('result: no subnet mask is an error (the reference text)', () => {
  assert.throws(() => resultFromAck(ack([]), 0), /DHCP option Subnet Mask not found in DHCPACK/);
  assert.throws(() => resultFromAck(ack([[Opt.SUBNET_MASK, [255, 0, 255, 0]]]), 0), /not contiguous/);
});

test('option names: the reference table, numbers 0-255, errors in the reference wording', () => {
  assert.equal(parseOptionName('host-name'), 12);
  assert.equal(parseOptionName('dhcp-client-identifier'), 61);
  assert.equal(parseOptionName('vendor-class-identifier'), 60);
  assert.equal(parseOptionName('121'), 121);
  assert.throws(
    () => parseOptionName('bogus'),
    (e: Error & { code?: number }) =>
      e.code === 7 &&
      e.message ===
        'Can not parse option "bogus": Can not parse option: strconv.ParseUint: parsing "bogus": invalid syntax',
  );
  assert.throws(() => parseOptionName('256'), /value out of range/);
});

test('prepareOptions: provided values from config and CNI_ARGS; request list with and without defaults', () => {
  const conf = readIpamConfig({
    ipam: {
      provide: [
        { option: 'host-name', fromArg: 'K8S_POD_NAME' },
        { option: 'user-class', value: 'gold' },
      ],
      request: [{ option: '42' }],
    },
  });
  const o = prepareOptions(conf, 'IgnoreUnknown=1;K8S_POD_NAME=web-1;broken');
  assert.deepEqual(o.provide, [
    [12, 'web-1'],
    [77, 'gold'],
  ]);
  assert.deepEqual(o.request, [42, ...DEFAULT_REQUESTED]);
  const skip = prepareOptions(
    readIpamConfig({ ipam: { request: [{ skipDefault: true, option: 'subnet-mask' }] } }),
    '',
  );
  assert.deepEqual(skip.request, [1]);
  assert.throws(
    () =>
      prepareOptions(
        readIpamConfig({ ipam: { provide: [{ option: 'host-name', value: 'x'.repeat(256) }] } }),
        '',
      ),
    /value too long for option "host-name"/,
  );
  assert.throws(
    () =>
      prepareOptions(
        readIpamConfig({ ipam: { provide: [{ option: 'host-name', fromArg: 'A' }] } }),
        `A=${'y'.repeat(256)}`,
      ),
    /value too long for option "host-name" from CNI_ARGS "A"/,
  );
  assert.deepEqual(
    [...parseCniArgs('a=1;b==2;c')],
    [
      ['a', '1'],
      ['b', '=2'],
    ],
  );
});

test('provide: the options the client owns are refused (code 7) whether given by value or fromArg; 61 and others pass', () => {
  for (const option of ['53', '50', '54', '55', '57', '52', '0', '255']) {
    for (const p of [
      { option, value: 'x' },
      { option, fromArg: 'ABSENT' },
    ]) {
      assert.throws(
        () => prepareOptions(readIpamConfig({ ipam: { provide: [p] } }), ''),
        (e: Error & { code?: number }) =>
          e.code === 7 &&
          e.message.startsWith(
            `ipam.provide[0]: option "${option}" cannot be provided: option ${option} is the DHCP client's own`,
          ),
        `option ${option} ${JSON.stringify(p)}`,
      );
    }
  }
  const ok = prepareOptions(
    readIpamConfig({
      ipam: {
        provide: [
          { option: 'dhcp-client-identifier', value: 'mine' },
          { option: '51', value: 'x' },
          { option: 'vendor-class-identifier', value: 'v' },
        ],
      },
    }),
    '',
  );
  assert.deepEqual(ok.provide, [
    [61, 'mine'],
    [51, 'x'],
    [60, 'v'],
  ]);
});

test('config: defaults and type errors (code 7)', () => {
  assert.deepEqual(readIpamConfig({}), {
    daemonSocketPath: '/run/cni/dhcp.sock',
    provide: [],
    request: [],
    priority: 0,
  });
  for (const [ipam, re] of [
    [{ daemonSocketPath: 5 }, /ipam.daemonSocketPath must be a string/],
    [{ provide: {} }, /ipam.provide must be a list of objects/],
    [{ request: [{ skipDefault: 'yes' }] }, /skipDefault must be a boolean/],
    [{ priority: 1.5 }, /ipam.priority must be an integer/],
  ] as const) {
    assert.throws(
      () => readIpamConfig({ ipam }),
      (e: Error & { code?: number }) => e.code === 7 && re.test(e.message),
    );
  }
});

test('client ID: the reference format, cut at 254 bytes', () => {
  assert.equal(generateClientId('ctr', 'net', 'eth0'), 'ctr/net/eth0');
  assert.equal(generateClientId('c'.repeat(300), 'net', 'eth0').length, 254);
});

test('lease times: options 51/58/59, else 1 h, T1 = 1/2, T2 = 85 %', () => {
  assert.deepEqual(leaseTimes(ack([])), { leaseMs: 3_600_000, t1Ms: 1_800_000, t2Ms: 3_060_000 });
  const m = ack([
    [Opt.LEASE_TIME, [0, 0, 0, 120]],
    [Opt.RENEWAL_TIME, [0, 0, 0, 3]],
    [Opt.REBINDING_TIME, [0, 0, 0, 6]],
  ]);
  assert.deepEqual(leaseTimes(m), { leaseMs: 120_000, t1Ms: 3000, t2Ms: 6000 });
});

test('backoff: four fast retries around 2 s, then 4 s doubling, capped at resendmax', () => {
  const next = backoffDelays(10_000);
  const d = Array.from({ length: 8 }, next);
  for (const x of d.slice(0, 4)) assert.ok(x >= 1000 && x <= 3000, String(x));
  assert.ok(d[4]! >= 3000 && d[4]! <= 5000);
  assert.ok(d[5]! >= 7000 && d[5]! <= 9000);
  for (const x of d.slice(6)) assert.ok(x <= 10_000, String(x));
});

test('Go durations and daemon flags (reference names and defaults; -statedir is ours)', () => {
  assert.equal(parseGoDuration('10s'), 10_000);
  assert.equal(parseGoDuration('1m30s'), 90_000);
  assert.equal(parseGoDuration('250ms'), 250);
  assert.equal(parseGoDuration('1.5h'), 5_400_000);
  assert.equal(parseGoDuration('soon'), undefined);
  assert.equal(parseGoDuration(''), undefined);
  const d = parseDaemonFlags([]);
  assert.equal(d.socketPath, '/run/cni/dhcp.sock');
  assert.deepEqual(d.settings, {
    timeoutMs: 10_000,
    resendMaxMs: 62_000,
    resendTimeoutMs: 208_000,
    broadcast: false,
  });
  const f = parseDaemonFlags([
    '-socketpath=/x.sock',
    '--pidfile',
    '/p',
    '-hostprefix',
    '/host',
    '-broadcast',
    '-timeout',
    '2s',
    '-resendmax=5s',
    '-resendtimeout',
    '1m',
    '-statedir',
    '/s',
  ]);
  assert.equal(f.socketPath, '/x.sock');
  assert.equal(f.pidFile, '/p');
  assert.equal(f.hostPrefix, '/host');
  assert.equal(f.stateDir, '/s');
  assert.deepEqual(f.settings, {
    timeoutMs: 2000,
    resendMaxMs: 5000,
    resendTimeoutMs: 60_000,
    broadcast: true,
  });
  assert.equal(parseDaemonFlags(['-broadcast=false']).settings.broadcast, false);
  assert.throws(() => parseDaemonFlags(['-nope']), /flag provided but not defined: -nope/);
  assert.throws(() => parseDaemonFlags(['-timeout']), /flag needs an argument: -timeout/);
  assert.throws(() => parseDaemonFlags(['-broadcast=maybe']), /invalid boolean value/);
  assert.throws(() => parseDaemonFlags(['stray']), /unexpected argument "stray"/);
});

test('protocol: status and errors through the socket; an HTTP answer (Go daemon) and silence fail fast', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-dhcp-unit-'));
  try {
    const daemon = new DhcpDaemon({
      settings: { timeoutMs: 100, resendMaxMs: 100, resendTimeoutMs: 100, broadcast: false },
      hostPrefix: '',
      log: () => {},
    });
    const server = net.createServer();
    const logs: string[] = [];
    attach(server, daemon, (m) => logs.push(m));
    const sock = join(dir, 'd.sock');
    await new Promise<void>((r) => server.listen(sock, r));
    assert.deepEqual(await callDaemon(sock, 'status', {}), { pid: process.pid, leases: [] });
    await assert.rejects(
      callDaemon(sock, 'allocate', { containerId: 'c', ifName: 'eth0', config: {} }),
      /missing netns/,
    );
    await assert.rejects(callDaemon(sock, 'release', { containerId: 'c', config: {} }), /missing ifName/);
    // DEL may come without a namespace: the lease is found by container ID, network and interface
    assert.deepEqual(
      await callDaemon(sock, 'release', {
        containerId: 'c',
        netns: '',
        ifName: 'eth0',
        config: { name: 'n' },
      }),
      {},
    );
    // a Go net/rpc client gets an HTTP error status it prints
    const goReply = await new Promise<string>((resolve) => {
      const c = net.createConnection(sock, () => c.write('CONNECT /_goRPC_ HTTP/1.0\n\n'));
      let got = '';
      c.setEncoding('utf8').on('data', (d: string) => (got += d));
      c.on('end', () => resolve(got));
    });
    assert.equal(goReply, GO_RPC_REFUSAL);
    assert.match(goReply, /^HTTP\/1\.0 400 /);
    assert.ok(logs.some((l) => /refused a Go net\/rpc client/.test(l)));
    server.close();

    // a peer that answers with HTTP (the Go daemon's net/http on a JSON line)
    const http = net.createServer((c) => c.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'));
    const httpSock = join(dir, 'http.sock');
    await new Promise<void>((r) => http.listen(httpSock, r));
    await assert.rejects(
      callDaemon(httpSock, 'allocate', {}),
      /it is the reference \(Go net\/rpc\) dhcp daemon/,
    );
    http.close();
    // a peer that never answers: bounded by the accept timeout
    const mute = net.createServer(() => {});
    const muteSock = join(dir, 'mute.sock');
    await new Promise<void>((r) => mute.listen(muteSock, r));
    await assert.rejects(
      callDaemon(muteSock, 'ping', {}, { acceptTimeoutMs: 200 }),
      /did not answer within 0.2s/,
    );
    mute.close();
    // nothing listening
    await assert.rejects(
      callDaemon(join(dir, 'none.sock'), 'ping', {}),
      /connect: no such file or directory/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('lease store: stale temps of a dead writer are removed at load; a state dir swapped for a symlink is not followed', async () => {
  const root = mkdtempSync(join(tmpdir(), 'cnikit-dhcp-store-'));
  try {
    const dir = join(root, 'state');
    mkdirSync(dir, { mode: 0o700 });
    const name = leaseFileName('c1/net/eth0');
    // a daemon killed between creating its temp file and the rename (pid 2^22+1 is above pid_max: not alive)
    const dead = `.${name}.${statSync('/proc/self/ns/pid').ino}-4194305.0123456789ab.tmp`;
    writeFileSync(join(dir, dead), '{');
    const logs: string[] = [];
    const store = new LeaseStore(dir, (m) => logs.push(m));
    assert.deepEqual(
      store.load((m) => logs.push(m)),
      [],
    );
    assert.deepEqual(readdirSync(dir), [], "the dead writer's temp is gone");
    assert.ok(logs.some((l) => l.includes(dead)));
    // the directory is moved away and a symlink to elsewhere planted in its place: writes stay in the directory
    const elsewhere = join(root, 'elsewhere');
    mkdirSync(elsewhere);
    renameSync(dir, join(root, 'moved'));
    symlinkSync(elsewhere, dir);
    store.save({ version: 1, clientId: 'c1/net/eth0' } as LeaseRecord);
    await store.flush();
    assert.deepEqual(readdirSync(elsewhere), [], 'nothing written through the planted symlink');
    assert.deepEqual(readdirSync(join(root, 'moved')), [name]);
    store.remove('c1/net/eth0');
    await store.close();
    assert.deepEqual(readdirSync(join(root, 'moved')), []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
