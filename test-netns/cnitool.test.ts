/**
 * cnitool black-box: dist-bin/cnitool (a hard link of the multicall executable) and `cnikit tool`, run like an
 * operator runs it, with a temporary NETCONFPATH and cache directory, from a private "host" namespace that this
 * process's main thread enters (children inherit it): add → check → status → del, gc removing a stale attachment,
 * --netns-create, errors as text with an exit status, and in-process vs --exec giving the same answers.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { containerIdFor } from '@cnikit/libcni';
import { createNamedNetns, deleteNamedNetns, sandboxForFile, scaled, tempDir } from '@cnikit/testing';
import { DIST, ensureBuilt, ensureLinks } from './dist.ts';

const info = ensureBuilt();
const scratch = tempDir('bb-cnitool');
const netDir = join(scratch.path, 'net.d');
const cacheDir = join(scratch.path, 'cache');
const created = `cnikit-cnitool-${process.pid}`;
// this file's main thread enters the sandbox's host namespace; cnitool and the plugins it runs inherit it
const file = sandboxForFile({ enterHost: true });
before(() => {
  mkdirSync(netDir);
  writeFileSync(
    join(netDir, '10-ci.conflist'),
    JSON.stringify({
      cniVersion: '1.1.0',
      name: 'ci',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni-ci0',
          isGateway: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: '10.93.0.0/24' }]],
            dataDir: join(scratch.path, 'ipam'),
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    }),
  );
});
after(() => {
  deleteNamedNetns(created);
  scratch.remove();
});

interface Run {
  status: number;
  stdout: string;
  stderr: string;
}

function cnitool(args: string[], env: Record<string, string> = {}, exe = join(DIST, 'cnitool')): Run {
  const r = spawnSync(exe, args, {
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      NETCONFPATH: netDir,
      CNI_PATH: DIST,
      ...env,
    },
    timeout: scaled(60_000),
  });
  if (r.error) throw r.error;
  return { status: r.status ?? 128, stdout: r.stdout, stderr: r.stderr };
}

function ok(r: Run, what: string): Run {
  assert.equal(r.status, 0, `${what} failed (exit ${r.status}): ${r.stdout}${r.stderr}`);
  return r;
}

const linksIn = (ns: string) =>
  (
    JSON.parse(spawnSync('ip', ['-n', ns, '-j', 'link'], { encoding: 'utf8' }).stdout) as Array<{
      ifname: string;
    }>
  ).map((l) => l.ifname);
const cacheFiles = () =>
  existsSync(join(cacheDir, 'results')) ? readdirSync(join(cacheDir, 'results')).sort() : [];

describe('cnitool', () => {
  test('add → check → status → del on a namespace path; container ID from the path like the reference', () => {
    const cid = containerIdFor(file.sb.container.path);
    assert.match(cid, /^cnitool-[0-9a-f]{20}$/);
    assert.equal(containerIdFor('/var/run/netns/testing'), 'cnitool-77383ca0a0715733ca6f', 'sha512 vector');
    const add = ok(
      cnitool(['add', 'ci', file.sb.container.path, '--cache-dir', cacheDir, '-v'], {
        CAP_ARGS: JSON.stringify({
          portMappings: [{ hostPort: 18443, containerPort: 443, protocol: 'tcp' }],
        }),
        CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAME=web',
      }),
      'add',
    );
    const result = JSON.parse(add.stdout);
    assert.equal(
      add.stderr,
      'cnitool: bridge: in-process\ncnitool: portmap: in-process\n',
      'plugins of this executable run in-process',
    );
    assert.equal(result.cniVersion, '1.1.0');
    assert.match(result.ips[0].address, /^10\.93\.0\.\d+\/24$/);
    assert.ok(linksIn(file.sb.container.name).includes('eth0'));
    assert.deepEqual(cacheFiles(), [`ci-${cid}-eth0`]);
    const entry = JSON.parse(readFileSync(join(cacheDir, 'results', `ci-${cid}-eth0`), 'utf8'));
    assert.deepEqual(entry.cniArgs, [
      ['IgnoreUnknown', '1'],
      ['K8S_POD_NAME', 'web'],
    ]);
    assert.deepEqual(entry.capabilityArgs, {
      portMappings: [{ containerPort: 443, hostPort: 18443, protocol: 'tcp' }],
    });
    assert.match(spawnSync('iptables-save', ['-t', 'nat'], { encoding: 'utf8' }).stdout, /--dport 18443 /);

    ok(cnitool(['check', 'ci', file.sb.container.path, '--cache-dir', cacheDir]), 'check');
    const status = ok(cnitool(['status', 'ci', file.sb.container.path, '--cache-dir', cacheDir]), 'status');
    assert.equal(status.stdout, '');
    // a second interface through `cnikit tool` and -i
    ok(
      cnitool(
        ['tool', 'add', 'ci', file.sb.container.path, '-i', 'net1', '--cache-dir', cacheDir],
        {},
        join(DIST, 'cnikit'),
      ),
      'add net1',
    );
    assert.ok(linksIn(file.sb.container.name).includes('net1'));
    // CHECK fails after the address is gone: text on stderr with the plugin's code, exit 1
    spawnSync('ip', ['-n', file.sb.container.name, 'addr', 'flush', 'dev', 'net1']);
    const bad = cnitool(['check', 'ci', file.sb.container.path, '--cache-dir', cacheDir], {
      CNI_IFNAME: 'net1',
    });
    assert.equal(bad.status, 1);
    assert.equal(bad.stdout, '');
    assert.match(
      bad.stderr,
      /^cnitool: Failed to match addr 10\.93\.0\.\d+\/24 on interface net1\n {2}CNI error code 999 from plugin "bridge" \(CHECK\)\n$/,
    );

    ok(
      cnitool(['del', 'ci', file.sb.container.path, '--cache-dir', cacheDir], { CNI_IFNAME: 'net1' }),
      'del net1',
    );
    ok(cnitool(['del', 'ci', file.sb.container.path, '--cache-dir', cacheDir]), 'del');
    assert.ok(!linksIn(file.sb.container.name).includes('eth0'));
    assert.deepEqual(cacheFiles(), []);
    assert.doesNotMatch(
      spawnSync('iptables-save', ['-t', 'nat'], { encoding: 'utf8' }).stdout,
      /--dport 18443 /,
    );
    ok(cnitool(['del', 'ci', file.sb.container.path, '--cache-dir', cacheDir]), 'del again (idempotent)');
  });

  test('gc deletes the stale attachment and keeps the one named by --keep', () => {
    const keep = createNamedNetns('cnikit-keep');
    const stale = createNamedNetns('cnikit-stale');
    try {
      ok(cnitool(['add', 'ci', keep.path, '--cache-dir', cacheDir]), 'add keep');
      const viaExec = ok(
        cnitool(['add', 'ci', stale.path, '--cache-dir', cacheDir, '--exec', '--verbose']),
        'add stale (exec)',
      );
      assert.equal(viaExec.stderr, 'cnitool: bridge: exec\ncnitool: portmap: exec\n');
      // the same result shape either way
      const inproc = JSON.parse(
        readFileSync(join(cacheDir, 'results', `ci-${containerIdFor(keep.path)}-eth0`), 'utf8'),
      ).result;
      const execd = JSON.parse(viaExec.stdout);
      assert.deepEqual(Object.keys(execd).sort(), Object.keys(inproc).sort());
      assert.deepEqual(
        execd.interfaces.map((i: { name: string }) => i.name.replace(/^veth.*/, 'veth')),
        inproc.interfaces.map((i: { name: string }) => i.name.replace(/^veth.*/, 'veth')),
      );
      assert.equal(cacheFiles().length, 2);
      deleteNamedNetns(stale);
      ok(cnitool(['gc', 'ci', keep.path, '--keep', keep.path, '--cache-dir', cacheDir]), 'gc');
      assert.deepEqual(cacheFiles(), [`ci-${containerIdFor(keep.path)}-eth0`]);
      const reserved = readdirSync(join(scratch.path, 'ipam', 'ci')).filter((f) => /^10\./.test(f));
      assert.equal(reserved.length, 1, 'the stale address was released');
      // without --keep every attachment of the network is stale, as with the reference's cnitool
      ok(cnitool(['gc', 'ci', keep.path, '--cache-dir', cacheDir]), 'gc all');
      assert.deepEqual(cacheFiles(), []);
      assert.ok(!linksIn(keep.name).includes('eth0'), 'deleted through DEL');
    } finally {
      deleteNamedNetns(keep);
      deleteNamedNetns(stale);
    }
  });

  test('--netns-create: add creates the named namespace, del removes it', () => {
    assert.ok(!existsSync(`/run/netns/${created}`));
    const add = ok(cnitool(['add', 'ci', '--netns-create', created, '--cache-dir', cacheDir]), 'add');
    assert.ok(existsSync(`/run/netns/${created}`), 'namespace created');
    assert.ok(linksIn(created).includes('eth0'));
    assert.equal(
      JSON.parse(add.stdout).interfaces.find((i: { name: string }) => i.name === 'eth0').sandbox,
      `/run/netns/${created}`,
    );
    ok(cnitool(['check', 'ci', '--netns-create', created, '--cache-dir', cacheDir]), 'check');
    ok(cnitool(['del', 'ci', '--netns-create', created, '--cache-dir', cacheDir]), 'del');
    assert.ok(!existsSync(`/run/netns/${created}`), 'namespace removed');
    assert.deepEqual(cacheFiles(), []);
  });

  for (const backend of ['bun', 'sea'] as const) {
    test(`${backend} back-end: \`cnikit tool\` runs the chain in-process when CNI_PATH resolves to itself`, () => {
      const dir = ensureLinks(backend, info);
      const exe = join(dir, 'cnikit');
      const env = { CNI_PATH: dir };
      const add = ok(
        cnitool(
          ['tool', 'add', 'ci', file.sb.container.path, '-i', 'be0', '-v', '--cache-dir', cacheDir],
          env,
          exe,
        ),
        'add',
      );
      assert.equal(add.stderr, 'cnitool: bridge: in-process\ncnitool: portmap: in-process\n');
      assert.equal(JSON.parse(add.stdout).interfaces.at(-1).name, 'be0');
      ok(
        cnitool(
          ['tool', 'check', 'ci', file.sb.container.path, '-i', 'be0', '--cache-dir', cacheDir],
          env,
          exe,
        ),
        'check',
      );
      ok(
        cnitool(
          ['tool', 'del', 'ci', file.sb.container.path, '-i', 'be0', '--cache-dir', cacheDir],
          env,
          exe,
        ),
        'del',
      );
      assert.ok(!linksIn(file.sb.container.name).includes('be0'));
      assert.deepEqual(cacheFiles(), []);
    });
  }

  test('usage and configuration errors: readable text and an exit status', () => {
    const cases: Array<[string[], Record<string, string>, number, RegExp]> = [
      [[], {}, 2, /^cnitool: missing command\n\nusage: cnitool/],
      [['frob', 'ci', '/x'], {}, 2, /unknown command "frob"/],
      [['add', 'ci'], {}, 2, /network name and namespace are required/],
      [['add', 'ci', '/x', '--netns-create', 'y'], {}, 2, /either NETNS or --netns-create/],
      [['add', 'ci', '--netns-create', '../etc'], {}, 2, /invalid --netns-create name/],
      [['add', 'ci', '/x', '--bogus'], {}, 2, /Unknown option '--bogus'/],
      [
        ['add', 'nosuch', '/x'],
        {},
        1,
        new RegExp(`^cnitool: no net configuration with name "nosuch" in ${netDir}\n$`),
      ],
      [
        ['add', 'ci', file.sb.container.path],
        { CNI_ARGS: 'A=1;B' },
        1,
        /^cnitool: invalid CNI_ARGS pair "B"\n$/,
      ],
      [['add', 'ci', file.sb.container.path], { CAP_ARGS: '{' }, 1, /^cnitool: CAP_ARGS: /],
      [
        ['add', 'ci', file.sb.container.path, '--cache-dir', cacheDir],
        { CNI_IFNAME: 'averyveryverylongname' },
        1,
        /^cnitool: plugin type="bridge" failed \(add\): interface name is too long; interface name should be less than 16 characters\n {2}CNI error code 4 /,
      ],
      [
        ['add', 'ci', file.sb.container.path],
        { CNI_PATH: '/nonexistent' },
        1,
        /failed to find plugin "bridge" in path \[\/nonexistent\]/,
      ],
    ];
    for (const [args, env, code, re] of cases) {
      const r = cnitool(args, env);
      assert.equal(r.status, code, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, re, args.join(' '));
      assert.equal(r.stdout, '');
    }
    assert.deepEqual(cacheFiles(), [], 'nothing was cached by a failed ADD');
    // --timeout kills a plugin that hangs
    const slowDir = join(scratch.path, 'slow');
    mkdirSync(slowDir, { recursive: true });
    writeFileSync(join(slowDir, 'slow'), '#!/bin/sh\nexec sleep 30\n', { mode: 0o755 });
    writeFileSync(
      join(netDir, '20-slow.conflist'),
      JSON.stringify({ cniVersion: '1.1.0', name: 'slow', plugins: [{ type: 'slow' }] }),
    );
    const t0 = Date.now();
    const slow = cnitool(
      ['add', 'slow', file.sb.container.path, '--timeout', '0.5', '--cache-dir', cacheDir],
      {
        CNI_PATH: slowDir,
      },
    );
    assert.equal(slow.status, 1);
    assert.match(
      slow.stderr,
      /^cnitool: plugin type="slow" failed \(add\): timed out after 500 ms \(plugin "slow" ADD\)\n$/,
    );
    assert.ok(Date.now() - t0 < scaled(15_000), 'did not wait for the plugin');
    const badTimeout = cnitool(['add', 'slow', file.sb.container.path, '--timeout', 'soon']);
    assert.equal(badTimeout.status, 2);
    assert.match(badTimeout.stderr, /invalid --timeout "soon"/);
    const help = cnitool(['--help']);
    assert.equal(help.status, 0);
    assert.match(help.stdout, /^usage: cnitool/);
  });
});
