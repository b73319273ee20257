import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { readDnsmasqLeases } from './testenv.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-leasefile-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const LINES = [
  '1764150000 02:00:00:00:00:01 10.77.0.10 * ff:00:00:00:01',
  '1764150000 02:00:00:00:00:02 10.77.0.11 * ff:00:00:00:02',
  '1764150000 02:00:00:00:00:03 10.77.0.12 web-7 ff:00:00:00:03',
];

test("a read that lands inside dnsmasq's in-place rewrite is not taken: it counts once a second read agrees", () => {
  // dnsmasq's lease_update_file(): ftruncate(fd, 0), then the lines. A read in between sees nothing, or the first
  // lines when they take more than one write; the race itself is microseconds wide, so the reads are given here
  const full = `${LINES.join('\n')}\n`;
  for (const caught of ['', `${LINES[0]}\n`]) {
    const reads = [caught, full, full];
    let n = 0;
    const got = readDnsmasqLeases('/dnsmasq.leases', 1000, () => reads[Math.min(n++, reads.length - 1)]!);
    assert.equal(n, 3, 'read until two reads agree');
    assert.equal(got.length, 3);
    assert.deepEqual(got[2], {
      expires: 1764150000,
      mac: '02:00:00:00:00:03',
      address: '10.77.0.12',
      hostname: 'web-7',
      clientId: 'ff:00:00:00:03',
    });
  }
  // a file that is really empty: two empty reads agree
  assert.deepEqual(
    readDnsmasqLeases('/dnsmasq.leases', 1000, () => ''),
    [],
  );
});

test('no lease file yet: no leases; a file that differs at every read is an error after the bound', async () => {
  assert.deepEqual(readDnsmasqLeases(join(dir, 'absent.leases')), []);
  const file = join(dir, 'busy.leases');
  writeFileSync(file, `${LINES[0]}\n`);
  assert.equal(readDnsmasqLeases(file)[0]?.address, '10.77.0.10');
  // a FIFO whose writer answers every open with a new line: no two reads agree, however the machine is loaded
  rmSync(file);
  assert.equal(spawnSync('mkfifo', [file]).status, 0);
  const writer = spawn(process.execPath, [
    '-e',
    `const fs = require('node:fs');
     for (let i = 0; ; i++) fs.writeFileSync(${JSON.stringify(file)}, \`\${i} 02:00:00:00:00:01 10.77.0.10 * ff\\n\`);`,
  ]);
  try {
    assert.throws(
      () => readDnsmasqLeases(file, 300),
      /busy\.leases changed between every two reads 20 ms apart for 300 ms/,
    );
  } finally {
    writer.kill();
  }
});
