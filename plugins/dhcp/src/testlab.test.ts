import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { readDnsmasqLeases } from './testlab.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-leasefile-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const LINES = [
  '1764150000 02:00:00:00:00:01 10.77.0.10 * ff:00:00:00:01',
  '1764150000 02:00:00:00:00:02 10.77.0.11 * ff:00:00:00:02',
  '1764150000 02:00:00:00:00:03 10.77.0.12 web-7 ff:00:00:00:03',
];

test('a lease file that dnsmasq rewrites in place is never read half-written', async () => {
  const file = join(dir, 'dnsmasq.leases');
  writeFileSync(file, `${LINES.join('\n')}\n`);
  // dnsmasq's lease_update_file(): ftruncate(fd, 0), then the lines in one write, here at random intervals of 0-20 ms
  // (dnsmasq rewrites once per packet); plain reads land between the two often enough. At the highest priority, so
  // that a loaded machine does not stretch the microseconds between the two into the 20 ms the reader allows for
  const writer = spawn(
    'nice',
    [
      '-n',
      '-20',
      process.execPath,
      '-e',
      `const fs = require('node:fs'); const fd = fs.openSync(${JSON.stringify(file)}, 'r+');
       const text = ${JSON.stringify(`${LINES.join('\n')}\n`)};
       const nap = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
       const end = Date.now() + 4000;
       while (Date.now() < end) { fs.ftruncateSync(fd, 0); fs.writeSync(fd, text, 0); nap(Math.random() * 20); }`,
    ],
    { stdio: 'inherit' },
  );
  const exited = new Promise((r) => writer.on('exit', r));
  try {
    await new Promise((r) => setTimeout(r, 100));
    let reads = 0;
    let wrong = 0;
    const end = Date.now() + 2500;
    while (Date.now() < end) {
      const got = readDnsmasqLeases(file, 10_000);
      reads++;
      if (got.length !== 3) wrong++;
      else
        assert.deepEqual(got[2], {
          expires: 1764150000,
          mac: '02:00:00:00:00:03',
          address: '10.77.0.12',
          hostname: 'web-7',
          clientId: 'ff:00:00:00:03',
        });
    }
    assert.ok(reads >= 10, `only ${reads} reads`);
    assert.equal(wrong, 0, `${wrong} of ${reads} reads saw a half-written file`);
  } finally {
    writer.kill();
    await exited;
  }
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
