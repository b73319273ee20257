/**
 * The check bodies: one function per check id of catalog.ts (but the add.<version> rows, which the harness runs
 * itself), each driving the plugin through the harness and answering its summary line, or throwing Fail or Skip.
 */
import { randomBytes } from 'node:crypto';
import { versionGte } from '@cnikit/skel';
import type { CniCallOptions } from '@cnikit/testing';
import { KIT_VERSIONS } from './catalog.ts';
import { errCode, errorObjectProblems, Fail, type Json, Skip, short } from './check-outcome.ts';
import type { Att, Harness } from './harness.ts';
import type { CallRecord } from './kit-types.ts';
import { suppliedText } from './report.ts';
import {
  diffWorld,
  droppedFromPrev,
  findTamper,
  formatWorldDiff,
  nsExec,
  rawFirewall,
  resultAddresses,
  resultShape,
  type World,
} from './state.ts';

const ENV_VARS = ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME'] as const;

async function expectEnvError(k: Harness, variable: string, env: Record<string, string | undefined>) {
  const ns = k.container();
  const r = await k.call('ADD', k.conf(k.workingVersion), {
    containerId: 'conformance',
    netns: ns.path,
    ifName: k.ifName,
    path: k.cniPath.join(':'),
    timeoutMs: k.timeoutMs,
    env,
  });
  const probs = errorObjectProblems(r);
  const code = errCode(r);
  if (probs.length || code !== 4)
    throw new Fail(
      `one error object with code 4 naming ${variable}`,
      [...probs, ...(code !== undefined && code !== 4 ? [`code ${code}`] : [])].join('; ') || short(r),
      [r.rec],
    );
  const j = JSON.parse(r.stdout);
  const text = `${j.msg} ${j.details ?? ''}`;
  if (!text.includes(variable) && !(env.CNI_COMMAND && text.includes(env.CNI_COMMAND)))
    throw new Fail(
      `msg or details naming ${variable}`,
      `msg ${JSON.stringify(j.msg)}, details ${JSON.stringify(j.details ?? '')}`,
      [r.rec],
    );
  return `code 4: ${j.msg}`;
}

export const CHECK_FNS = {
  async 'version.output'(k: Harness): Promise<string> {
    const want = [
      ...new Set([...k.supported.filter((v) => KIT_VERSIONS.includes(v as never)), '1.1.0', k.baseVersion]),
    ];
    const seen: string[] = [];
    for (const v of want) {
      const r = await k.call('VERSION', { cniVersion: v }, { path: k.cniPath.join(':') });
      if (r.code !== 0) throw new Fail(`VERSION with cniVersion ${v} to succeed`, short(r), [r.rec]);
      const j = r.json;
      if (!j || typeof j !== 'object') throw new Fail('one JSON object on stdout', short(r), [r.rec]);
      if (j.cniVersion !== v)
        throw new Fail(
          `cniVersion "${v}" (the value specified on input)`,
          `cniVersion ${JSON.stringify(j.cniVersion)}`,
          [r.rec],
        );
      if (
        !Array.isArray(j.supportedVersions) ||
        j.supportedVersions.length === 0 ||
        j.supportedVersions.some((x: unknown) => typeof x !== 'string' || !/^\d+\.\d+\.\d+$/.test(x))
      )
        throw new Fail('supportedVersions: a non-empty list of version strings', short(r), [r.rec]);
      seen.push(v);
    }
    return `echoes ${seen.join(', ')}; supports ${k.supported.join(', ')}`;
  },

  async 'version.config'(k: Harness): Promise<string> {
    if (k.configVersionProblem) throw new Fail('a cniVersion the chain supports', k.configVersionProblem);
    const supplied = suppliedText(k.suppliedRuntimeConfig);
    return `cniVersion ${k.baseVersion} is supported (${k.supported.join(', ')})${supplied ? `; ${supplied}` : ''}`;
  },

  async 'version.unsupported'(k: Harness): Promise<string> {
    const ns = k.container();
    const r = await k.call('ADD', k.conf('99.0.0'), {
      containerId: 'conformance',
      netns: ns.path,
      path: k.cniPath.join(':'),
      timeoutMs: k.timeoutMs,
    });
    const probs = errorObjectProblems(r);
    if (probs.length || errCode(r) !== 1)
      throw new Fail(
        'one error object with code 1 (incompatible CNI version)',
        probs.join('; ') || short(r),
        [r.rec],
      );
    return `code 1: ${JSON.parse(r.stdout).msg}`;
  },

  async 'env.command'(k: Harness): Promise<string> {
    const bogus = await expectEnvError(k, 'CNI_COMMAND', { CNI_COMMAND: 'BOGUS' });
    const ns = k.container();
    const r = await k.call('ADD', k.conf(k.workingVersion), {
      containerId: 'conformance',
      netns: ns.path,
      path: k.cniPath.join(':'),
      timeoutMs: k.timeoutMs,
      env: { CNI_COMMAND: undefined },
    });
    if (r.code === 0) {
      if (r.stdout.trim() !== '' || r.stderr.trim() === '')
        throw new Fail(
          'without CNI_COMMAND: code 4, or the about banner on stderr and nothing on stdout',
          short(r),
          [r.rec],
        );
      return `BOGUS → ${bogus}; unset → the about banner (${r.stderr.trim().split('\n')[0]})`;
    }
    const probs = errorObjectProblems(r);
    if (probs.length || errCode(r) !== 4)
      throw new Fail('without CNI_COMMAND: one error object with code 4', probs.join('; ') || short(r), [
        r.rec,
      ]);
    return `BOGUS → ${bogus}; unset → code 4`;
  },
  'env.containerid': (k: Harness) => expectEnvError(k, ENV_VARS[0], { CNI_CONTAINERID: undefined }),
  'env.netns': (k: Harness) => expectEnvError(k, ENV_VARS[1], { CNI_NETNS: undefined }),
  'env.ifname': (k: Harness) => expectEnvError(k, ENV_VARS[2], { CNI_IFNAME: undefined }),

  async 'stdin.malformed'(k: Harness): Promise<string> {
    const ns = k.container();
    const full = JSON.stringify(k.conf(k.workingVersion));
    const cases: Array<[string, string]> = [
      ['truncated JSON', full.slice(0, Math.max(1, Math.floor(full.length / 2)))],
      ['random bytes', Buffer.from(randomBytes(48)).toString('latin1')],
      ['a JSON array', '[1,2,3]'],
      ['a JSON string', '"cni"'],
      ['not JSON at all', 'cniVersion=1.0.0'],
    ];
    const codes: string[] = [];
    for (const [what, stdin] of cases) {
      const r = await k.call('ADD', stdin, {
        containerId: 'conformance',
        netns: ns.path,
        path: k.cniPath.join(':'),
        timeoutMs: k.timeoutMs,
      });
      const probs = errorObjectProblems(r);
      const code = errCode(r);
      if (probs.length || (code !== 6 && code !== 7))
        throw new Fail(
          `${what} on stdin: one error object with code 6 or 7, no stack trace`,
          [...probs, ...(code !== undefined ? [`code ${code}`] : [])].join('; '),
          [r.rec],
        );
      codes.push(`${what} → ${code}`);
    }
    return codes.join('; ');
  },

  async 'stdin.oversized'(k: Harness): Promise<string> {
    const ns = k.container();
    const stdin = `{"cniVersion":"${k.baseVersion}","name":"${k.network}","type":"${k.type}","pad":"${'A'.repeat(8 * 1024 * 1024)}`;
    const r = await k.call('ADD', stdin, {
      containerId: 'conformance',
      netns: ns.path,
      path: k.cniPath.join(':'),
      timeoutMs: k.timeoutMs,
    });
    const probs = errorObjectProblems(r);
    const code = errCode(r);
    if (r.signal) probs.push(`killed by ${r.signal} (timeout ${k.timeoutMs / 1000} s)`);
    if (probs.length || (code !== 6 && code !== 7))
      throw new Fail(
        'one error object with code 6 or 7 for 8 MiB of broken JSON',
        [...probs, ...(code !== undefined ? [`code ${code}`] : [])].join('; '),
        [r.rec],
      );
    return `code ${code}`;
  },

  async 'add.prevresult'(k: Harness): Promise<string> {
    if (!k.prefix.length) throw new Skip(`${k.type} is first in its chain: it gets no prevResult`);
    const v = k.chainSupports(k.baseVersion) ? k.baseVersion : undefined;
    if (!v) throw new Skip(`the chain does not support ${k.baseVersion}`);
    const a = k.att(k.container(), v);
    const json = await k.addOk(a);
    const addCall = k.lastCall();
    const dropped = droppedFromPrev(a.prev, json);
    await k.delAll(a);
    if (dropped.length)
      throw new Fail(
        'every part of prevResult in the result',
        `missing: ${dropped.join(', ')}\nprevResult: ${JSON.stringify(a.prev)}\nresult: ${JSON.stringify(json)}`,
        addCall ? [addCall] : [],
      );
    return `prevResult (${(a.prev?.interfaces ?? []).length} interface(s), ${(a.prev?.ips ?? []).length} address(es)) passed through`;
  },

  async 'add.ifname-exists'(k: Harness): Promise<string> {
    if (k.prefix.length) throw new Skip(`${k.type} is chained: the interface is not its own`);
    const sb = k.sandbox();
    const a = k.att(k.container());
    const before = k.world([a.ns], { light: true }); // only whether the container had the name before
    const json = await k.addOk(a);
    const creates =
      Array.isArray(json?.interfaces) &&
      json.interfaces.some((i: Json) => i?.name === a.rt.ifName && i?.sandbox === a.ns.path) &&
      !(before.containers[a.ns.name]?.links ?? []).some((l) => l.includes(`"ifname":"${a.rt.ifName}"`));
    await k.delAll(a);
    if (!creates) throw new Skip(`ADD does not create ${a.rt.ifName} in the container`);
    const b = k.att(k.container());
    nsExec(sb, b.ns, 'ip', ['link', 'add', b.rt.ifName, 'type', 'veth', 'peer', 'name', 'cfmpeer0']);
    const w0 = k.world([b.ns]);
    const r = await k.putAdd(b);
    const w1 = k.world([b.ns]);
    if (r.code === 0) {
      await k.putDel(b);
      throw new Fail(`ADD to fail: ${b.rt.ifName} exists in the container`, short(r), [r.rec]);
    }
    const probs = errorObjectProblems(r);
    if (probs.length) throw new Fail('one error object', probs.join('; '), [r.rec]);
    const d = diffWorld(w0, w1);
    if (d.length) throw new Fail('nothing changed by the failed ADD', formatWorldDiff(d), [r.rec]);
    return `failed with code ${errCode(r)}: ${JSON.parse(r.stdout).msg}; nothing changed`;
  },

  async 'add.failure-clean'(k: Harness): Promise<string> {
    const sb = k.sandbox();
    // shared state a node has anyway (bridge, base chains, forwarding)
    const p = k.att(k.container());
    await k.addOk(p, 'the priming ADD');
    await k.delAll(p);
    const tried: string[] = [];
    const forcings: Array<[string, (a: Att) => CniCallOptions]> = [
      ['CNI_NETNS names no namespace', () => ({ netns: k.goneNetns() })],
      ['CNI_IFNAME of 16 characters', () => ({ ifName: 'cfm0123456789abc' })],
    ];
    for (const [what, extra] of forcings) {
      const a = k.att(k.container());
      await k.prefixAdd(a);
      const w0 = k.world([a.ns]);
      const x = extra(a);
      const r = await k.putAdd(a, x);
      if (r.code === 0) {
        tried.push(what);
        await k.putDel(a, x);
        await k.prefixDel(a);
        continue;
      }
      const w1 = k.world([a.ns]);
      const probs = errorObjectProblems(r);
      if (probs.length) throw new Fail(`${what}: one error object`, probs.join('; '), [r.rec]);
      const d = diffWorld(w0, w1);
      if (d.length) {
        await k.putDel(a, x);
        const cleaned = diffWorld(w0, k.world([a.ns])).length === 0;
        throw new Fail(
          `${what}: the failed ADD leaves host, container and /var/lib/cni as they were`,
          `${formatWorldDiff(d)}\n(a DEL afterwards ${cleaned ? 'does' : 'does not'} remove it)`,
          [r.rec],
        );
      }
      await k.prefixDel(a);
      return `${what}: failed with code ${errCode(r)}, nothing changed`;
    }
    void sb;
    throw new Skip(`no forced failure: the plugin succeeded with ${tried.join(' and with ')}`);
  },

  async 'check.after-add'(k: Harness): Promise<string> {
    if (!versionGte(k.baseVersion, '0.4.0'))
      throw new Skip(`configuration version ${k.baseVersion} has no CHECK`);
    const a = k.att(k.container());
    await k.addOk(a);
    const r = await k.putCheck(a);
    await k.delAll(a);
    if (r.code !== 0 || r.stdout.trim() !== '')
      throw new Fail('CHECK to succeed with nothing on stdout', short(r), [r.rec]);
    return 'CHECK passed';
  },

  async 'check.tampered'(k: Harness): Promise<string> {
    if (!versionGte(k.baseVersion, '0.4.0'))
      throw new Skip(`configuration version ${k.baseVersion} has no CHECK`);
    const sb = k.sandbox();
    const a = k.att(k.container());
    await k.prefixAdd(a);
    const w0 = k.world([a.ns]);
    const f0 = rawFirewall(sb);
    const add = await k.putAdd(a);
    if (add.code !== 0) throw new Fail('ADD to succeed', short(add), [add.rec]);
    const w1 = k.world([a.ns]);
    const f1 = rawFirewall(sb);
    const ok = await k.putCheck(a);
    if (ok.code !== 0) {
      await k.delAll(a);
      throw new Skip('CHECK fails already right after ADD (check.after-add)');
    }
    const t = findTamper(sb, a.ns, k.stateDir, w0, w1, f0, f1);
    if (!t) {
      await k.delAll(a);
      throw new Skip('ADD changed nothing the kit can revert');
    }
    t.apply();
    const r = await k.putCheck(a);
    await k.delAll(a);
    if (r.code === 0) throw new Fail(`CHECK to fail after the kit ${t.what}`, 'CHECK succeeded', [r.rec]);
    const probs = errorObjectProblems(r);
    if (probs.length) throw new Fail('one error object from the failing CHECK', probs.join('; '), [r.rec]);
    return `after the kit ${t.what.split('\n')[0]}: CHECK failed with code ${errCode(r)}`;
  },

  async 'del.twice'(k: Harness): Promise<string> {
    const a = k.att(k.container());
    await k.addOk(a);
    const d1 = await k.putDel(a);
    if (d1.code !== 0) throw new Fail('the first DEL to succeed', short(d1), [d1.rec]);
    const d2 = await k.putDel(a);
    await k.prefixDel(a);
    if (d2.code !== 0) throw new Fail('the second DEL to succeed', short(d2), [d2.rec]);
    return 'both DELs succeeded';
  },

  async 'del.without-add'(k: Harness): Promise<string> {
    const a = k.att(k.container());
    const d = await k.putDel(a);
    if (d.code !== 0) throw new Fail('DEL without ADD to succeed', short(d), [d.rec]);
    return 'DEL succeeded';
  },

  async 'del.netns-gone'(k: Harness): Promise<string> {
    const sb = k.sandbox();
    const a = k.att(k.container());
    await k.addOk(a);
    nsExec(sb, 'host', 'ip', ['netns', 'del', a.ns.name], { check: false });
    const d = await k.putDel(a);
    await k.prefixDel(a);
    if (d.code !== 0) throw new Fail('DEL to succeed with the namespace gone', short(d), [d.rec]);
    return 'DEL succeeded';
  },

  async 'del.cleanup'(k: Harness): Promise<string> {
    const p = k.att(k.container());
    await k.addOk(p, 'the priming ADD');
    await k.delAll(p);
    const a = k.att(k.container());
    const w0 = k.world([a.ns]);
    await k.addOk(a);
    const d = await k.putDel(a);
    await k.prefixDel(a);
    if (d.code !== 0) throw new Fail('DEL to succeed', short(d), [d.rec]);
    const diff = diffWorld(w0, k.world([a.ns]), { pathsOnly: true });
    if (diff.length)
      throw new Fail('host, container and file paths as before ADD', formatWorldDiff(diff), [d.rec]);
    return 'everything ADD did is gone';
  },

  async concurrency(k: Harness): Promise<string> {
    const atts = Array.from({ length: k.concurrency }, () => k.att(k.container()));
    const w0 = k.world(
      atts.map((a) => a.ns),
      { light: true },
    );
    const adds = await Promise.all(
      atts.map(async (a) => {
        try {
          await k.prefixAdd(a);
          return await k.putAdd(a);
        } catch (e) {
          return e as Error;
        }
      }),
    );
    const failed = adds.find((r) => r instanceof Error || r.code !== 0);
    const seen = new Map<string, string>();
    const dup: string[] = [];
    atts.forEach((a) => {
      for (const ip of resultAddresses(a.result)) {
        const other = seen.get(ip);
        if (other) dup.push(`${ip} given to ${other} and ${a.rt.containerId}`);
        seen.set(ip, a.rt.containerId);
      }
    });
    const dels = await Promise.all(
      atts.map(async (a) => {
        const r = await k.putDel(a);
        await k.prefixDel(a);
        return r;
      }),
    );
    if (failed)
      throw failed instanceof Error
        ? failed
        : new Fail(`${k.concurrency} concurrent ADDs to succeed`, short(failed), [failed.rec]);
    // the same addresses in every container: the configuration names them (static), no conflict
    const sets = new Set(atts.map((x) => resultAddresses(x.result).sort().join(',')));
    if (dup.length && sets.size > 1) throw new Fail('a different address per container', dup.join('; '));
    const badDel = dels.find((r) => r.code !== 0);
    if (badDel) throw new Fail(`${k.concurrency} concurrent DELs to succeed`, short(badDel), [badDel.rec]);
    const diff = diffWorld(
      w0,
      k.world(
        atts.map((a) => a.ns),
        { light: true },
      ),
      { pathsOnly: true },
    );
    const ctr = diff.filter((d) => d.section.startsWith('container'));
    if (ctr.length) throw new Fail('the containers as before after the DELs', formatWorldDiff(ctr));
    return `${k.concurrency} ADDs and ${k.concurrency} DELs at once, ${seen.size} distinct address(es)`;
  },

  async 'gc.valid-attachments'(k: Harness): Promise<string> {
    if (!k.chainSupports('1.1.0')) throw new Skip('GC needs 1.1.0, which the chain does not support');
    const a = k.att(k.container(), '1.1.0');
    const b = k.att(k.container(), '1.1.0');
    const lines = (w: World) => [
      ...Object.values(w.host)
        .flat()
        .map((l) => `host ${l}`),
      ...w.files.map((f) => `file ${f.replace(/ [0-9a-f?]+$/, '')}`),
    ];
    const added = (x: World, y: World) => {
      const old = new Set(lines(x));
      return lines(y).filter((l) => !old.has(l));
    };
    await k.prefixAdd(a);
    const a0 = k.world([]);
    if ((await k.putAdd(a)).code !== 0)
      throw new Fail('ADD of A to succeed', short(k.lastCall() as CallRecord));
    const aAdded = added(a0, k.world([]));
    await k.prefixAdd(b);
    const b0 = k.world([]);
    if ((await k.putAdd(b)).code !== 0)
      throw new Fail('ADD of B to succeed', short(k.lastCall() as CallRecord));
    const bAdded = added(b0, k.world([]));
    await k.deleteContainer(b.ns);
    const valid = [{ containerID: a.rt.containerId, ifname: a.rt.ifName }];
    const r = await k.call(
      'GC',
      k.conf('1.1.0', undefined, { 'cni.dev/valid-attachments': valid, 'cni.dev/attachments': valid }),
      { path: k.cniPath.join(':'), timeoutMs: k.timeoutMs },
    );
    const now = new Set(lines(k.world([])));
    await k.delAll(a);
    await k.putDel(b);
    await k.prefixDel(b);
    if (r.code !== 0) throw new Fail('GC to succeed', short(r), [r.rec]);
    const lostA = aAdded.filter((l) => !now.has(l));
    const keptB = bAdded.filter((l) => now.has(l));
    if (lostA.length || keptB.length)
      throw new Fail(
        'GC keeps what ADD made for the valid attachment A and removes what it made for B',
        [...lostA.map((l) => `removed (A's): ${l}`), ...keptB.map((l) => `kept (B's): ${l}`)]
          .slice(0, 30)
          .join('\n'),
        [r.rec],
      );
    return `kept ${aAdded.length} line(s) of A, removed ${bAdded.length} of B`;
  },

  async 'status.answers'(k: Harness): Promise<string> {
    if (!k.chainSupports('1.1.0') && !k.supported.includes('1.1.0'))
      throw new Skip('STATUS needs 1.1.0, which the plugin does not support');
    const r = await k.call('STATUS', k.conf('1.1.0'), { path: k.cniPath.join(':'), timeoutMs: k.timeoutMs });
    if (r.code === 0) {
      if (r.stdout.trim() !== '')
        throw new Fail('nothing on stdout from a successful STATUS', short(r), [r.rec]);
      return 'ready (exit 0)';
    }
    const probs = errorObjectProblems(r);
    const code = errCode(r);
    if (probs.length || (code !== 50 && code !== 51))
      throw new Fail(
        'exit 0, or one error object with code 50 or 51',
        [...probs, ...(code !== undefined ? [`code ${code}`] : [])].join('; ') || short(r),
        [r.rec],
      );
    return `not available: code ${code}`;
  },

  async determinism(k: Harness): Promise<string> {
    const v1 = await k.call('VERSION', { cniVersion: k.baseVersion }, { path: k.cniPath.join(':') });
    const v2 = await k.call('VERSION', { cniVersion: k.baseVersion }, { path: k.cniPath.join(':') });
    if (v1.stdout !== v2.stdout)
      throw new Fail('the same VERSION output twice', `${v1.stdout} then ${v2.stdout}`, [v1.rec, v2.rec]);
    const a = k.att(k.container());
    const first = await k.addOk(a);
    const firstCall = k.lastCall() as CallRecord;
    await k.delAll(a);
    a.prev = undefined;
    a.result = undefined;
    const second = await k.addOk(a, 'the second ADD');
    const secondCall = k.lastCall() as CallRecord;
    await k.delAll(a);
    const s1 = JSON.stringify(resultShape(first));
    const s2 = JSON.stringify(resultShape(second));
    if (s1 !== s2) throw new Fail(`results of the same shape: ${s1}`, s2, [firstCall, secondCall]);
    return 'VERSION identical; ADD results of the same shape';
  },
};
