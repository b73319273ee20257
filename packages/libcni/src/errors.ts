/**
 * libcni's errors. Every class is branded (a global symbol listing the class kinds), so `instanceof` and
 * `XError.is(x)` hold across two bundled copies of the library, like skel's CniError.
 *
 *   LibcniError            base: anything libcni reports (message = the reference's wording)
 *   ├─ ConfigError         a configuration file or bytes that cannot be used (parse / validation)
 *   │  ├─ NotFoundError    `no net configuration with name "x" in /dir`
 *   │  └─ NoConfigsFoundError `no net configurations found in /dir`
 *   ├─ CacheError          a cache entry that cannot be written or read
 *   ├─ PluginError         a plugin failed: spec error object (code, msg, details) + its stderr
 *   ├─ AbortedError        the call's AbortSignal fired (or its timeout passed)
 *   └─ MultiError          several failures of one operation (GC keeps going and reports all)
 */
import type { CniErrorJSON } from '@cnikit/skel/invoke';

const BRAND = Symbol.for('cnikit.libcni.error');

type Kind =
  | 'LibcniError'
  | 'ConfigError'
  | 'NotFoundError'
  | 'NoConfigsFoundError'
  | 'CacheError'
  | 'PluginError'
  | 'AbortedError'
  | 'MultiError';

function kindsOf(ctor: unknown): Kind[] {
  const out: Kind[] = [];
  for (let c = ctor as { kind?: Kind } | null; c && c !== Error; c = Object.getPrototypeOf(c)) {
    if (Object.hasOwn(c, 'kind') && c.kind) out.push(c.kind);
  }
  return out;
}

export class LibcniError extends Error {
  static readonly kind: Kind = 'LibcniError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.kind;
    Object.defineProperty(this, BRAND, { value: kindsOf(new.target) });
  }

  /** True for an instance of this class (or a subclass), also when created by another copy of the library. */
  static is<T extends abstract new (...args: never[]) => LibcniError>(
    this: T & { kind: Kind },
    value: unknown,
  ): value is InstanceType<T> {
    const kinds = (value as Record<symbol, unknown> | null)?.[BRAND];
    // biome-ignore lint/complexity/noThisInStatic: the class `is` was called on (a subclass checks its own kind)
    return typeof value === 'object' && Array.isArray(kinds) && kinds.includes(this.kind);
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    const kinds = (value as Record<symbol, unknown> | null)?.[BRAND];
    // biome-ignore lint/complexity/noThisInStatic: the class on the right of instanceof (a subclass checks its own kind)
    return typeof value === 'object' && Array.isArray(kinds) && kinds.includes((this as { kind: Kind }).kind);
  }
}

export class ConfigError extends LibcniError {
  static override readonly kind: Kind = 'ConfigError';
}

/** Go `NotFoundError`: no configuration of that name in the directory. */
export class NotFoundError extends ConfigError {
  static override readonly kind: Kind = 'NotFoundError';
  readonly dir: string;
  readonly network: string;
  constructor(dir: string, network: string) {
    super(`no net configuration with name "${network}" in ${dir}`);
    this.dir = dir;
    this.network = network;
  }
}

/** Go `NoConfigsFoundError`: the directory holds no configuration file at all. */
export class NoConfigsFoundError extends ConfigError {
  static override readonly kind: Kind = 'NoConfigsFoundError';
  readonly dir: string;
  constructor(dir: string) {
    super(`no net configurations found in ${dir}`);
    this.dir = dir;
  }
}

export class CacheError extends LibcniError {
  static override readonly kind: Kind = 'CacheError';
}

export type Verb = 'ADD' | 'CHECK' | 'DEL' | 'GC' | 'STATUS' | 'VERSION';

export interface PluginErrorInit {
  /** The plugin's `type`. */
  plugin: string;
  command: Verb;
  /** The spec error object (code 0 when the plugin printed none, as Go reports it). */
  cni: CniErrorJSON;
  /** What the plugin wrote to stderr ('' for none). */
  stderr: string;
  /** The executable (or, in-process, the file CNI_PATH resolved). */
  path?: string;
  /** How the message is worded: the reference's prefix (`plugin type="bridge" failed (add): `) or none. */
  prefix?: string;
}

/** A plugin exited with an error (or could not be run). `code`/`msg`/`details` are the spec error object. */
export class PluginError extends LibcniError {
  static override readonly kind: Kind = 'PluginError';
  readonly plugin: string;
  readonly command: Verb;
  readonly code: number;
  readonly msg: string;
  readonly details: string;
  readonly stderr: string;
  readonly path: string | undefined;
  /** The context put before the plugin's message (e.g. `plugin type="bridge" failed (add): `). */
  readonly prefix: string;
  constructor(init: PluginErrorInit, options?: { cause?: unknown }) {
    const text = init.cni.details ? `${init.cni.msg}; ${init.cni.details}` : init.cni.msg;
    super(`${init.prefix ?? ''}${text}`, options);
    this.plugin = init.plugin;
    this.command = init.command;
    this.code = init.cni.code;
    this.msg = init.cni.msg;
    this.details = init.cni.details ?? '';
    this.stderr = init.stderr;
    this.path = init.path;
    this.prefix = init.prefix ?? '';
  }

  /** The same error with more context in front of the message. */
  withPrefix(prefix: string): PluginError {
    return new PluginError(
      {
        plugin: this.plugin,
        command: this.command,
        cni: this.toJSON(),
        stderr: this.stderr,
        ...(this.path ? { path: this.path } : {}),
        prefix: `${prefix}${this.prefix}`,
      },
      { cause: this },
    );
  }

  /** The spec error object, as the plugin printed it. */
  toJSON(): CniErrorJSON {
    return this.details
      ? { code: this.code, msg: this.msg, details: this.details }
      : { code: this.code, msg: this.msg };
  }
}

export class AbortedError extends LibcniError {
  static override readonly kind: Kind = 'AbortedError';
}

/** Several failures of one operation (Go's errors.Join); `message` has one line per failure. */
export class MultiError extends LibcniError {
  static override readonly kind: Kind = 'MultiError';
  readonly errors: readonly Error[];
  constructor(errors: readonly Error[]) {
    super(errors.map((e) => e.message).join('\n'), { cause: errors[0] });
    this.errors = errors;
  }
}
