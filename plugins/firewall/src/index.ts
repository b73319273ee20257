/**
 * firewall: opens the host FORWARD path for the container addresses (iptables) or binds them to a firewalld zone,
 * and optionally isolates bridges (reference: plugins/meta/firewall at HEAD, plugins.md §7).
 *
 * - ADD: prevResult required. iptables backend: per family that has addresses, ONE iptables-restore with the
 *   chains, the jumps, the per-address rules and the ingress-policy rules. firewalld backend: `addSource` per
 *   address (ZONE_ALREADY_SET tolerated), the ingress policy through iptables. cnikit's record of the
 *   attachment is written BEFORE any of that, so a process killed midway leaves rules that DEL without
 *   prevResult finds. A failure removes the per-address rules / sources this ADD added, and the record.
 * - DEL: removes the per-address rules / sources of prevResult and of the record (so DEL works without
 *   prevResult); shared chains, jumps and isolation rules stay. Idempotent. DEL and GC also remove the temp files
 *   of record writes killed before their rename.
 * - CHECK: the reference's checks and messages, without creating anything; firewalld's querySource answer is
 *   examined. GC: stale records of this network. STATUS: code 50 when the backend is not usable.
 */
import { iptablesBatch, isFirewalldError } from '@cnikit/firewall';
import {
  ALL_VERSIONS,
  CniError,
  ErrorCode,
  ErrorList,
  errorReason,
  internalError,
  type Plugin,
  type Request,
  type Result,
  Rollback,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel';
import type { StateDir } from '@cnikit/sys';
import {
  type Backend,
  bridgeName,
  type FirewallConf,
  type HostIP,
  hostRoute,
  ingressPolicyOf,
  parseConf,
  resultIPs,
} from './config.ts';
import {
  addFirewalld,
  type Bus,
  checkFirewalld,
  firewalldStatus,
  removeFirewalld,
  withBus,
} from './firewalld.ts';
import {
  addIptables,
  checkIptables,
  deletePerIPRules,
  FAMILIES,
  familyName,
  filterChainMayExist,
  iptablesUsable,
  ofFamily,
  removeIptablesRules,
} from './iptables.ts';
import {
  type AttachmentRecord,
  formatRecord,
  openRecords,
  parseRecord,
  RECORD_SUFFIX,
  recordName,
} from './records.ts';

/** The configured backend, else firewalld when it owns its D-Bus name, else iptables (the reference's rule). */
async function resolveBackend(conf: FirewallConf, bus: Bus): Promise<Backend> {
  if (conf.backend) return conf.backend;
  return (await bus.firewalldRunning()) ? 'firewalld' : 'iptables';
}

function writeRecord(conf: FirewallConf, rec: AttachmentRecord): void {
  let dir: StateDir | undefined;
  try {
    dir = openRecords(conf.dataDir, true) as StateDir;
    dir.writeAtomic(recordName(rec.network, rec.containerID, rec.ifname), formatRecord(rec));
  } catch (err) {
    throw internalError(`failed to write the firewall record: ${errorReason(err)}`, err);
  } finally {
    dir?.close();
  }
}

function removeRecord(conf: FirewallConf, name: string): void {
  const dir = openRecords(conf.dataDir, false);
  try {
    dir?.remove(name);
  } finally {
    dir?.close();
  }
}

function add(req: Request<FirewallConf>): Promise<Result> {
  return withBus(req, (bus) => addWith(req, bus));
}

async function addWith(req: Request<FirewallConf>, bus: Bus): Promise<Result> {
  const conf = req.conf;
  const policy = ingressPolicyOf(conf);
  if (!req.prevResult) throw internalError('missing prevResult from earlier plugin');
  const prev = req.prevResult;
  const ips = resultIPs(prev);
  const ingress =
    policy === 'open'
      ? undefined
      : { bridge: bridgeName(prev, policy), policy: policy as 'same-bridge' | 'isolated' };
  const backend = await resolveBackend(conf, bus);
  const undo = new Rollback();
  try {
    // the record first: a process killed at any later point leaves rules that DEL without
    // prevResult finds through it; killed before it is durable, it has changed nothing
    const rec = recordName(conf.name, req.containerId, req.ifName);
    writeRecord(conf, {
      network: conf.name,
      containerID: req.containerId,
      ifname: req.ifName,
      backend,
      zone: conf.zone,
      ips: ips.map((i) => i.ip),
    });
    undo.push('removal of the firewall record', () => removeRecord(conf, rec));
    if (backend === 'firewalld') {
      await addFirewalld(bus, conf, ips, undo);
      if (ingress) addIptables(conf, ips, false, ingress, undo);
    } else {
      addIptables(conf, ips, true, ingress, undo);
    }
  } catch (err) {
    await undo.undoAll(req.log);
    throw err;
  }
  return prev;
}

interface Target {
  backend: Backend;
  zone: string;
  ips: HostIP[];
}

function addTarget(targets: Target[], backend: Backend, zone: string, ips: readonly HostIP[]): void {
  let t = targets.find((x) => x.backend === backend && (backend === 'iptables' || x.zone === zone));
  if (!t) {
    t = { backend, zone, ips: [] };
    targets.push(t);
  }
  for (const i of ips) if (!t.ips.some((x) => x.ip === i.ip)) t.ips.push(i);
}

function recordIPs(rec: AttachmentRecord): HostIP[] {
  return rec.ips.map((ip) => hostRoute(ip)).filter((h): h is HostIP => h !== undefined);
}

/**
 * Remove the per-address rules / sources of one target. iptables failures are returned (the caller reports
 * them); firewalld failures other than "not bound" are logged and ignored, like the reference.
 */
async function removeTarget(
  req: Request<FirewallConf>,
  bus: Bus,
  t: Target,
  errors: ErrorList,
): Promise<boolean> {
  const before = errors.length;
  if (t.backend === 'iptables') {
    errors.run('failed to remove the firewall rules', () => removeIptablesRules(t.ips));
    return errors.length === before;
  }
  await removeFirewalld(req, bus, t.zone, t.ips);
  return true;
}

function readRecord(req: Request<FirewallConf>, dir: StateDir, name: string): AttachmentRecord | undefined {
  let raw: Buffer | undefined;
  try {
    raw = dir.read(name);
  } catch (err) {
    req.log.warn('unreadable firewall record %s: %s', dir.display(name), errorReason(err));
    return undefined;
  }
  if (raw === undefined) return undefined;
  const rec = parseRecord(raw.toString('utf8'));
  if (!rec) req.log.warn('malformed firewall record %s ignored', dir.display(name));
  return rec;
}

/** Remove the temp files of record writes killed before their rename; a failure only warns. */
function sweepTemps(req: Request<FirewallConf>, dir: StateDir): void {
  try {
    dir.removeStaleTemps();
  } catch (err) {
    req.log.warn('firewall records: stale temp files not removed: %s', errorReason(err));
  }
}

function del(req: Request<FirewallConf>): Promise<void> {
  return withBus(req, (bus) => delWith(req, bus));
}

async function delWith(req: Request<FirewallConf>, bus: Bus): Promise<void> {
  const conf = req.conf;
  const targets: Target[] = [];
  if (req.prevResult)
    addTarget(targets, await resolveBackend(conf, bus), conf.zone, resultIPs(req.prevResult));
  let dir: StateDir | undefined;
  try {
    dir = openRecords(conf.dataDir, false);
  } catch (err) {
    req.log.warn('DEL: firewall records not usable: %s', errorReason(err));
  }
  const errors = new ErrorList();
  try {
    if (dir) sweepTemps(req, dir);
    const name = recordName(conf.name, req.containerId, req.ifName);
    const rec = dir ? readRecord(req, dir, name) : undefined;
    if (rec) addTarget(targets, rec.backend, rec.zone, recordIPs(rec));
    let clean = true;
    for (const t of targets) if (!(await removeTarget(req, bus, t, errors))) clean = false;
    if (dir && clean) errors.run('failed to remove the firewall record', () => dir.remove(name));
  } finally {
    dir?.close();
  }
  errors.throwIfAny();
  if (conf.ingressError) throw conf.ingressError;
}

function check(req: Request<FirewallConf>): Promise<void> {
  return withBus(req, (bus) => checkWith(req, bus));
}

async function checkWith(req: Request<FirewallConf>, bus: Bus): Promise<void> {
  const conf = req.conf;
  ingressPolicyOf(conf);
  if (!req.prevResult) throw internalError('missing prevResult from earlier plugin');
  const ips = resultIPs(req.prevResult);
  if ((await resolveBackend(conf, bus)) === 'firewalld') await checkFirewalld(bus, conf, ips);
  else checkIptables(conf, ips);
}

function gc(req: Request<FirewallConf>): Promise<void> {
  return withBus(req, (bus) => gcWith(req, bus));
}

async function gcWith(req: Request<FirewallConf>, bus: Bus): Promise<void> {
  const conf = req.conf;
  ingressPolicyOf(conf);
  const dir = openRecords(conf.dataDir, false);
  if (!dir) return;
  const errors = new ErrorList();
  try {
    sweepTemps(req, dir);
    const valid = new Set(
      (req.validAttachments ?? []).map((a) => recordName(conf.name, a.containerID, a.ifname)),
    );
    const stale: Array<{ name: string; rec: AttachmentRecord }> = [];
    // Addresses still held by live attachments (an address of a stale record may have been given to a new
    // container since): their rules and sources stay.
    const keepRules = new Set<string>();
    const keepSources = new Set<string>();
    for (const name of dir.list()) {
      if (!name.endsWith(RECORD_SUFFIX) || name.startsWith('.')) continue;
      const rec = readRecord(req, dir, name);
      if (!rec) continue;
      if (rec.network === conf.name && !valid.has(name)) {
        stale.push({ name, rec });
        continue;
      }
      for (const ip of rec.ips) {
        if (rec.backend === 'iptables') keepRules.add(ip);
        else keepSources.add(`${rec.zone}\0${ip}`);
      }
    }
    // iptables: the rules of every stale attachment in one iptables-restore per family
    const ipt = stale.filter((s) => s.rec.backend === 'iptables');
    if (ipt.length > 0) {
      let ok = true;
      for (const f of FAMILIES) {
        const ips = ipt.flatMap((s) => ofFamily(recordIPs(s.rec), f)).filter((i) => !keepRules.has(i.ip));
        if (ips.length === 0 || !filterChainMayExist(f)) continue;
        try {
          const b = iptablesBatch(f);
          deletePerIPRules(b, ips);
          b.commit();
        } catch (err) {
          ok = false;
          for (const s of ipt)
            errors.add(err, `failed to remove the ${familyName(f)} firewall rules of ${dir.display(s.name)}`);
        }
      }
      if (ok)
        for (const s of ipt) errors.run(`failed to remove ${dir.display(s.name)}`, () => dir.remove(s.name));
    }
    const fwd = stale.filter((s) => s.rec.backend === 'firewalld');
    const running = fwd.length > 0 && (await bus.firewalldRunning());
    for (const s of fwd) {
      await errors.run(`failed to remove the firewalld sources of ${dir.display(s.name)}`, async () => {
        if (running) {
          const fw = await bus.firewalld();
          for (const ip of s.rec.ips) {
            if (keepSources.has(`${s.rec.zone}\0${ip}`)) continue;
            try {
              await fw.removeSource(s.rec.zone, ip);
            } catch (err) {
              if (!isFirewalldError(err, 'UNKNOWN_SOURCE')) throw err;
            }
          }
        } else {
          req.log.warn(
            'firewalld is not running on %s: the sources of %s are gone with it',
            bus.address,
            s.name,
          );
        }
        dir.remove(s.name);
      });
    }
  } finally {
    dir.close();
  }
  errors.throwIfAny();
}

function status(req: Request<FirewallConf>): Promise<void> {
  return withBus(req, (bus) => statusWith(req, bus));
}

async function statusWith(req: Request<FirewallConf>, bus: Bus): Promise<void> {
  const conf = req.conf;
  const policy = ingressPolicyOf(conf);
  const backend = await resolveBackend(conf, bus);
  if (backend === 'firewalld') {
    await firewalldStatus(bus);
    if (policy !== 'open' && !iptablesUsable()) {
      throw new CniError(
        ErrorCode.PluginNotAvailable,
        `ingress policy ${JSON.stringify(policy)} needs iptables, which is not usable (Debian/Ubuntu package "iptables")`,
      );
    }
    return;
  }
  if (!iptablesUsable()) {
    throw new CniError(
      ErrorCode.PluginNotAvailable,
      'neither iptables nor ip6tables is usable (Debian/Ubuntu package "iptables")',
    );
  }
}

export const plugin: Plugin<FirewallConf> = {
  name: 'firewall',
  ipam: false,
  about: `CNI firewall plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS.slice(ALL_VERSIONS.indexOf('0.4.0')),
  prevResultErrorPrefix: 'could not parse prevResult: ',
  conf: parseConf,
  add,
  del,
  check,
  gc,
  status,
};
