/**
 * The firewall plugin's firewalld backend: container addresses bound to a zone as sources over D-Bus (one
 * connection per plugin call, made on first use), with the reference's tolerated errors (ZONE_ALREADY_SET on ADD,
 * UNKNOWN_SOURCE on removal) and messages.
 */
import {
  busMayExist,
  type DBusOptions,
  Firewalld,
  isFirewalldError,
  systemBusAddress,
} from '@cnikit/firewall';
import { CniError, ErrorCode, errorReason, internalError, type Request, type Rollback } from '@cnikit/skel';
import type { FirewallConf, HostIP } from './config.ts';

/** The system bus of one plugin call: connected on first use (one connection for every call), closed at the end. */
export class Bus {
  readonly opts: DBusOptions;
  private fw: Promise<Firewalld> | undefined;
  constructor(req: Request<FirewallConf>) {
    this.opts = { env: req.env };
  }
  get address(): string {
    return systemBusAddress(this.opts);
  }
  firewalld(): Promise<Firewalld> {
    this.fw ??= Firewalld.connect(this.opts);
    return this.fw;
  }
  /** Whether firewalld owns its name; no bus socket → false without connecting; any failure → false. */
  async firewalldRunning(): Promise<boolean> {
    if (!busMayExist(this.address)) return false;
    try {
      return await (await this.firewalld()).running();
    } catch {
      return false;
    }
  }
  async close(): Promise<void> {
    const fw = this.fw;
    this.fw = undefined;
    if (fw) await fw.then((f) => f.close()).catch(() => undefined);
  }
}

/** Run a verb with a Bus that is closed whatever happens. */
export async function withBus<T>(req: Request<FirewallConf>, fn: (bus: Bus) => Promise<T>): Promise<T> {
  const bus = new Bus(req);
  try {
    return await fn(bus);
  } finally {
    await bus.close();
  }
}

export async function addFirewalld(
  bus: Bus,
  conf: FirewallConf,
  ips: readonly HostIP[],
  undo: Rollback,
): Promise<void> {
  for (const { ip } of ips) {
    let fw: Firewalld | undefined;
    try {
      fw = await bus.firewalld();
      await fw.addSource(conf.zone, ip);
    } catch (err) {
      if (isFirewalldError(err, 'ZONE_ALREADY_SET')) continue;
      throw internalError(`failed to add the address ${ip} to ${conf.zone} zone: ${errorReason(err)}`, err);
    }
    const client = fw;
    undo.push(`removal of ${ip} from zone ${conf.zone}`, () => client.removeSource(conf.zone, ip));
  }
}

/** Unbind `ips` from `zone`; failures other than "not bound" are logged and ignored, like the reference. */
export async function removeFirewalld(
  req: Request<FirewallConf>,
  bus: Bus,
  zone: string,
  ips: readonly HostIP[],
): Promise<void> {
  if (!(await bus.firewalldRunning())) {
    req.log.warn(
      'firewalld is not running on %s: the sources %s of zone %s are gone with it',
      bus.address,
      ips.map((i) => i.ip).join(', '),
      zone,
    );
    return;
  }
  for (const { ip } of ips) {
    try {
      await (await bus.firewalld()).removeSource(zone, ip);
    } catch (err) {
      if (!isFirewalldError(err, 'UNKNOWN_SOURCE'))
        req.log.warn('failed to remove the address %s from %s zone: %s', ip, zone, errorReason(err));
    }
  }
}

/** CHECK: every address must be a source of the zone (firewalld's querySource). */
export async function checkFirewalld(bus: Bus, conf: FirewallConf, ips: readonly HostIP[]): Promise<void> {
  for (const { ip } of ips) {
    let found: boolean;
    try {
      found = await (await bus.firewalld()).querySource(conf.zone, ip);
    } catch (err) {
      throw new CniError(
        ErrorCode.Internal,
        `failed to find the address ${ip} in ${conf.zone} zone`,
        errorReason(err),
        { cause: err },
      );
    }
    if (!found) throw internalError(`failed to find the address ${ip} in ${conf.zone} zone`);
  }
}

/** STATUS of the firewalld backend: firewalld must own its name on the system bus. */
export async function firewalldStatus(bus: Bus): Promise<void> {
  if (!(await bus.firewalldRunning())) {
    throw new CniError(
      ErrorCode.PluginNotAvailable,
      `firewalld is not running: the name org.fedoraproject.FirewallD1 has no owner on the system bus ${bus.address}`,
    );
  }
}
