// The request/dump layer with a scripted fake socket: ACK/error decoding, extended ACK text, stale sequence
// numbers, multi-datagram dumps, NLM_F_DUMP_INTR retries, timeouts, socket lifetime.
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { listLinks } from './link.ts';
import {
  NLM_F_ACK,
  NLM_F_ACK_TLVS,
  NLM_F_DUMP,
  NLM_F_DUMP_INTR,
  NLM_F_MULTI,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  NlBuilder,
  type NlMessage,
  parseMessages,
  RTM_GETLINK,
  RTM_NEWLINK,
} from './nl.ts';
import {
  DUMP_ATTEMPTS,
  isExistsError,
  isNotFoundError,
  NetlinkError,
  type NetlinkTransport,
  rtDump,
  rtGet,
  rtRequest,
  withSocket,
} from './rtnl.ts';
import { setRequestTimeout, setTransportFactory } from './rtnl-seams.ts';

function raw(type: number, flags: number, seq: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(16);
  const len = 16 + payload.length;
  h.writeUInt32LE(len, 0);
  h.writeUInt16LE(type, 4);
  h.writeUInt16LE(flags, 6);
  h.writeUInt32LE(seq, 8);
  h.writeUInt32LE(4242, 12);
  const pad = Buffer.alloc((4 - (len % 4)) % 4);
  return Buffer.concat([h, payload, pad]);
}

function errPayload(errno: number, req: Buffer, extack?: string): Buffer {
  const code = Buffer.alloc(4);
  code.writeInt32LE(-errno, 0);
  if (!extack) return Buffer.concat([code, req]);
  const text = Buffer.from(`${extack}\0`);
  const attr = Buffer.alloc(4);
  attr.writeUInt16LE(4 + text.length, 0);
  attr.writeUInt16LE(1, 2);
  const pad = Buffer.alloc((4 - (text.length % 4)) % 4);
  return Buffer.concat([code, req.subarray(0, 16), attr, text, pad]);
}

function linkMsg(seq: number, index: number, name: string, flags = NLM_F_MULTI): Buffer {
  const b = new NlBuilder(RTM_NEWLINK, flags).ifinfo(0, index).attrStr(3, name).finish(seq);
  return b;
}

type Script = (req: NlMessage, raw: Buffer, n: number) => Buffer[];

class FakeSocket implements NetlinkTransport {
  readonly portId = 4242;
  sent: Buffer[] = [];
  queue: Buffer[] = [];
  closed = false;
  constructor(private script: Script) {}
  send(msg: Uint8Array): void {
    assert.equal(this.closed, false, 'send on a closed socket');
    const b = Buffer.from(msg);
    this.sent.push(b);
    this.queue.push(...this.script(parseMessages(b)[0]!, b, this.sent.length));
  }
  recv(): Buffer | null {
    return this.queue.shift() ?? null;
  }
  close(): void {
    this.closed = true;
  }
}

let sockets: FakeSocket[] = [];
function useScript(script: Script): void {
  setTransportFactory(() => {
    const s = new FakeSocket(script);
    sockets.push(s);
    return s;
  });
}

afterEach(() => {
  setTransportFactory();
  sockets = [];
});

const ackReq = () => new NlBuilder(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK).ifinfo(0, 1);
const dumpReq = () => new NlBuilder(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP).ifinfo(0, 0);

describe('rtnl request layer', () => {
  test('ACK with error 0 succeeds; the socket is closed afterwards', () => {
    useScript((req, b) => [raw(NLMSG_ERROR, 0x100, req.seq, errPayload(0, b.subarray(0, 16)))]);
    rtRequest(ackReq(), 'op');
    assert.equal(sockets.length, 1);
    assert.equal(sockets[0]!.closed, true);
    const sent = parseMessages(sockets[0]!.sent[0]!)[0]!;
    assert.equal(sent.flags & NLM_F_ACK, NLM_F_ACK);
    assert.notEqual(sent.seq, 0);
  });

  test('kernel errors become NetlinkError with errno, code, Go reason and the operation', () => {
    useScript((req, b) => [raw(NLMSG_ERROR, 0, req.seq, errPayload(17, b))]);
    assert.throws(
      () => rtRequest(ackReq(), 'failed to add address 10.1.2.3/24 to eth0'),
      (e: NetlinkError) => {
        assert.ok(e instanceof NetlinkError);
        assert.ok(e instanceof Error);
        assert.equal(e.errno, 17);
        assert.equal(e.code, 'EEXIST');
        assert.equal(e.syscall, 'netlink');
        assert.equal(e.reason, 'file exists');
        assert.equal(e.op, 'failed to add address 10.1.2.3/24 to eth0');
        assert.equal(e.message, 'failed to add address 10.1.2.3/24 to eth0: file exists');
        assert.ok(isExistsError(e));
        return true;
      },
    );
    assert.equal(sockets[0]!.closed, true, 'closed on error too');
  });

  test('errno names for the usual suspects', () => {
    for (const [errno, code, reason] of [
      [19, 'ENODEV', 'no such device'],
      [2, 'ENOENT', 'no such file or directory'],
      [95, 'EOPNOTSUPP', 'operation not supported'],
      [3, 'ESRCH', 'no such process'],
      [99, 'EADDRNOTAVAIL', 'cannot assign requested address'],
    ] as const) {
      useScript((req, b) => [raw(NLMSG_ERROR, 0, req.seq, errPayload(errno, b))]);
      assert.throws(() => rtRequest(ackReq(), 'x'), { code, reason, message: `x: ${reason}` });
    }
    assert.ok(isNotFoundError(new NetlinkError(19, 'x')));
    assert.ok(isNotFoundError(new NetlinkError(99, 'x')));
    assert.ok(!isNotFoundError(new NetlinkError(17, 'x')));
  });

  test('extended ACK message is kept in kernelMessage (not in the message text)', () => {
    useScript((req, b) => [
      raw(NLMSG_ERROR, NLM_F_ACK_TLVS | 0x100, req.seq, errPayload(95, b, 'Unknown device type')),
    ]);
    assert.throws(() => rtRequest(ackReq(), 'failed to create ifb x'), {
      code: 'EOPNOTSUPP',
      kernelMessage: 'Unknown device type',
      message: 'failed to create ifb x: operation not supported',
    });
  });

  test('answers with another sequence number are ignored', () => {
    useScript((req, b) => [
      raw(NLMSG_ERROR, 0, req.seq - 1, errPayload(17, b)),
      Buffer.concat([
        raw(NLMSG_ERROR, 0, req.seq + 5, errPayload(19, b)),
        raw(NLMSG_ERROR, 0, req.seq, errPayload(0, b)),
      ]),
    ]);
    rtRequest(ackReq(), 'op');
  });

  test('get returns the reply message', () => {
    useScript((req) => [linkMsg(req.seq, 7, 'eth7', 0)]);
    const m = rtGet(new NlBuilder(RTM_GETLINK, NLM_F_REQUEST).ifinfo(0, 7), 'get');
    assert.equal(m.type, RTM_NEWLINK);
    assert.equal(m.payload.readInt32LE(4), 7);
  });

  test('dump spanning several datagrams with several messages each', () => {
    useScript((req) => [
      Buffer.concat([linkMsg(req.seq, 1, 'lo'), linkMsg(req.seq, 2, 'eth0')]),
      linkMsg(req.seq, 3, 'eth1'),
      raw(NLMSG_DONE, NLM_F_MULTI, req.seq, Buffer.alloc(4)),
    ]);
    assert.deepEqual(
      listLinks().map((l) => [l.index, l.name]),
      [
        [1, 'lo'],
        [2, 'eth0'],
        [3, 'eth1'],
      ],
    );
  });

  test('NLM_F_DUMP_INTR: the dump is repeated and the consistent result returned', () => {
    useScript((req, _b, n) => {
      const intr = n < 3 ? NLM_F_DUMP_INTR : 0;
      return [
        linkMsg(req.seq, 1, `attempt${n}`, NLM_F_MULTI | intr),
        raw(NLMSG_DONE, NLM_F_MULTI | intr, req.seq, Buffer.alloc(4)),
      ];
    });
    const msgs = rtDump(dumpReq(), 'failed to list links');
    assert.equal(msgs.length, 1);
    assert.equal(sockets[0]!.sent.length, 3);
    const seqs = sockets[0]!.sent.map((b) => b.readUInt32LE(8));
    assert.equal(new Set(seqs).size, 3, 'every attempt has its own sequence number');
  });

  test('NLM_F_DUMP_INTR on every attempt: EINTR error after DUMP_ATTEMPTS tries', () => {
    useScript((req) => [raw(NLMSG_DONE, NLM_F_MULTI | NLM_F_DUMP_INTR, req.seq, Buffer.alloc(4))]);
    assert.throws(() => rtDump(dumpReq(), 'failed to list links'), {
      code: 'EINTR',
      message: /^failed to list links: dump interrupted 5 times in a row/,
    });
    assert.equal(DUMP_ATTEMPTS, 5);
    assert.equal(sockets[0]!.sent.length, 5);
  });

  test('NLMSG_DONE carrying an error fails the dump', () => {
    useScript((req) => {
      const p = Buffer.alloc(4);
      p.writeInt32LE(-22, 0);
      return [raw(NLMSG_DONE, NLM_F_MULTI, req.seq, p)];
    });
    assert.throws(() => rtDump(dumpReq(), 'dump'), { code: 'EINVAL', message: 'dump: invalid argument' });
  });

  test('no answer: ETIMEDOUT error', () => {
    useScript(() => []);
    const prev = setRequestTimeout(50);
    try {
      assert.throws(() => rtRequest(ackReq(), 'failed to set eth0 up'), {
        code: 'ETIMEDOUT',
        message: /^failed to set eth0 up: no answer from the kernel/,
      });
    } finally {
      setRequestTimeout(prev);
    }
  });

  test('nested operations share one socket; separate operations use separate sockets', () => {
    useScript((req, b) => [raw(NLMSG_ERROR, 0, req.seq, errPayload(0, b))]);
    withSocket(() => {
      rtRequest(ackReq(), 'a');
      rtRequest(ackReq(), 'b');
    });
    assert.equal(sockets.length, 1);
    assert.equal(sockets[0]!.sent.length, 2);
    rtRequest(ackReq(), 'c');
    assert.equal(sockets.length, 2);
    assert.ok(sockets.every((s) => s.closed));
  });

  test('a socket that cannot be opened gives a NetlinkError naming the operation', () => {
    setTransportFactory(() => {
      throw Object.assign(new Error('socket: permission denied'), { errno: 1 });
    });
    assert.throws(() => rtRequest(ackReq(), 'failed to set eth0 up'), {
      code: 'EPERM',
      message: /^failed to set eth0 up: cannot open netlink socket/,
    });
  });
});
