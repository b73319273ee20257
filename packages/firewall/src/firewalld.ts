/**
 * firewalld over D-Bus (dbus.ts, the wire client): the zone calls of the reference plugin plus getSources, on one
 * connection per plugin call. When no `unix:path=` socket of the bus address exists, `firewalldRunning()` answers
 * false without connecting.
 */
import {
  busMayExist,
  DBUS_NAME,
  DBUS_PATH,
  type DBusArg,
  DBusConnection,
  DBusError,
  type DBusOptions,
  systemBusAddress,
} from './dbus.ts';

export const FIREWALLD_NAME = 'org.fedoraproject.FirewallD1';
export const FIREWALLD_PATH = '/org/fedoraproject/FirewallD1';
export const FIREWALLD_ZONE_INTERFACE = 'org.fedoraproject.FirewallD1.zone';

/** A firewalld client on one bus connection (the calls of the reference plugin, plus getSources). */
export class Firewalld {
  private constructor(readonly conn: DBusConnection) {}

  static async connect(opts: DBusOptions = {}): Promise<Firewalld> {
    return new Firewalld(await DBusConnection.connect(opts));
  }

  /** Whether `org.fedoraproject.FirewallD1` has an owner on the bus (the reference's isFirewalldRunning). */
  async running(): Promise<boolean> {
    const [v] = await this.conn.call(DBUS_NAME, DBUS_PATH, DBUS_NAME, 'NameHasOwner', 's', [FIREWALLD_NAME]);
    return v === true;
  }

  private zone(member: string, signature: string, args: DBusArg[]): Promise<unknown[]> {
    return this.conn.call(FIREWALLD_NAME, FIREWALLD_PATH, FIREWALLD_ZONE_INTERFACE, member, signature, args);
  }

  /** `zone.addSource(zone, source)`: binds a source (`10.0.0.2/32`) to a zone (runtime configuration). */
  async addSource(zone: string, source: string): Promise<void> {
    await this.zone('addSource', 'ss', [zone, source]);
  }

  /** `zone.removeSource(zone, source)`. */
  async removeSource(zone: string, source: string): Promise<void> {
    await this.zone('removeSource', 'ss', [zone, source]);
  }

  /** `zone.querySource(zone, source)`: whether the source is bound to the zone. */
  async querySource(zone: string, source: string): Promise<boolean> {
    const [v] = await this.zone('querySource', 'ss', [zone, source]);
    if (typeof v !== 'boolean') throw new DBusError('', `querySource: unexpected reply ${JSON.stringify(v)}`);
    return v;
  }

  /** `zone.getSources(zone)`: the sources bound to a zone. */
  async getSources(zone: string): Promise<string[]> {
    const [v] = await this.zone('getSources', 's', [zone]);
    if (!Array.isArray(v)) throw new DBusError('', `getSources: unexpected reply ${JSON.stringify(v)}`);
    return v.map(String);
  }

  close(): void {
    this.conn.close();
  }
}

/** Run `fn` with a firewalld client on the system bus, closing the connection afterwards. */
export async function withFirewalld<T>(opts: DBusOptions, fn: (fw: Firewalld) => Promise<T>): Promise<T> {
  const fw = await Firewalld.connect(opts);
  try {
    return await fn(fw);
  } finally {
    fw.close();
  }
}

/** Whether firewalld owns its name on the system bus; any failure (no bus, no socket) is "not running". */
export async function firewalldRunning(opts: DBusOptions = {}): Promise<boolean> {
  if (!busMayExist(systemBusAddress(opts))) return false;
  try {
    return await withFirewalld(opts, (fw) => fw.running());
  } catch {
    return false;
  }
}

/** True for a D-Bus error whose text names one of the given firewalld codes (`ZONE_ALREADY_SET`, …). */
export function isFirewalldError(err: unknown, ...codes: string[]): boolean {
  if (!(err instanceof DBusError)) return false;
  return codes.some((c) => err.text.includes(c));
}
