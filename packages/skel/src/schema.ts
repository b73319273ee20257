/**
 * Typed config decoding with Go `encoding/json` semantics:
 * - object keys match case-insensitively (an exact match is preferred; with several matching keys the
 *   later one in the document wins, like Go);
 * - unknown keys are ignored (use `.passthrough()` to keep them);
 * - `null` (and a missing key) means "not set": the `.default(v)` value, or `undefined` for `.optional()`;
 *   a non-optional schema without default then fails with `<path>: missing required value`;
 * - a type mismatch throws `CniError(7, "<path>: expected <type>, got <json type>")`, naming the key
 *   path (`ipam.ranges[0][1].subnet`).
 *
 * ```ts
 * const Conf = s.object({ name: s.string(), mtu: s.int({ min: 0 }).optional(), isGateway: s.bool().default(false) });
 * type Conf = Infer<typeof Conf>;
 * const conf = decode(Conf, req.config);
 * ```
 */
import { CniError, ErrorCode } from './errors.ts';
import { foldKey } from './fold.ts';

type Decoder<T> = (value: unknown, path: string) => T;

const MISSING: unique symbol = Symbol('missing');

/** A schema producing values of type `T`. */
export class Schema<T> {
  /** @internal */ readonly _type!: T;
  /** @internal */ readonly _dec: Decoder<T>;
  /** Human-readable type name used in errors (`string`, `array of int`, ...). */
  readonly typeName: string;
  /** @internal */ readonly _fallback: (() => T) | typeof MISSING;

  constructor(typeName: string, dec: Decoder<T>, fallback: (() => T) | typeof MISSING = MISSING) {
    this.typeName = typeName;
    this._dec = dec;
    this._fallback = fallback;
  }

  /** Missing or null → `undefined`. */
  optional(): Schema<T | undefined> {
    return new Schema<T | undefined>(this.typeName, this._dec, () => undefined);
  }

  /** Missing or null → `value` (objects/arrays are cloned per use). */
  default(value: T): Schema<T> {
    return new Schema<T>(this.typeName, this._dec, () => structuredClone(value));
  }

  /**
   * Decode and then check/transform the value. To reject it, throw an Error: it becomes CniError 7 with the path
   * (`ipam.subnet: <message>`, the Error kept as cause); a thrown CniError passes unchanged (its own code and
   * exact text, e.g. the reference's message). A thrown string is accepted like an Error's message.
   */
  refine<U = T>(fn: (value: T, path: string) => U): Schema<U> {
    const dec = this._dec;
    const fb = this._fallback;
    return new Schema<U>(
      this.typeName,
      (v, path) => {
        const out = dec(v, path);
        return applyRefine(fn, out, path);
      },
      fb === MISSING ? MISSING : () => fb() as unknown as U,
    );
  }

  /** @internal decode a present value or fall back. */
  _run(value: unknown, path: string): T {
    if (value === undefined || value === null) {
      if (this._fallback === MISSING)
        throw new CniError(ErrorCode.InvalidNetworkConfig, `${path || '(value)'}: missing required value`);
      return this._fallback();
    }
    return this._dec(value, path);
  }
}

function applyRefine<T, U>(fn: (value: T, path: string) => U, value: T, path: string): U {
  try {
    return fn(value, path);
  } catch (e) {
    if (CniError.is(e)) throw e;
    const msg = typeof e === 'string' ? e : e instanceof Error ? e.message : String(e);
    throw new CniError(ErrorCode.InvalidNetworkConfig, `${path || '(value)'}: ${msg}`, '', { cause: e });
  }
}

/** The decoded type of a schema. */
export type Infer<S> = S extends Schema<infer T> ? T : never;

type Shape = Record<string, Schema<unknown>>;
type Simplify<T> = { [K in keyof T]: T[K] } & {};
type OptionalKeys<S extends Shape> = { [K in keyof S]: undefined extends Infer<S[K]> ? K : never }[keyof S];
type RequiredKeys<S extends Shape> = Exclude<keyof S, OptionalKeys<S>>;
export type ObjectOf<S extends Shape> = Simplify<
  { [K in RequiredKeys<S>]: Infer<S[K]> } & { [K in OptionalKeys<S>]?: Infer<S[K]> }
>;

/** JSON type name of a value, as used in error messages. */
export function jsonTypeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'boolean';
  if (typeof v === 'number') return 'number';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'object') return 'object';
  return typeof v;
}

function mismatch(path: string, expected: string, v: unknown): CniError {
  let got = jsonTypeOf(v);
  if (typeof v === 'number' || typeof v === 'boolean') got += ` ${String(v)}`;
  return new CniError(
    ErrorCode.InvalidNetworkConfig,
    `${path || '(value)'}: expected ${expected}, got ${got}`,
  );
}

function childPath(path: string, key: string): string {
  const k = /^[A-Za-z_$][\w$/.-]*$/.test(key) ? key : JSON.stringify(key);
  return path ? `${path}.${k}` : k;
}

/** Assign an own property even for keys like `__proto__` (no prototype changes from input). */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export { foldKey } from './fold.ts';

export interface IntOptions {
  min?: number;
  max?: number;
}

export class ObjectSchema<S extends Shape> extends Schema<ObjectOf<S>> {
  readonly shape: S;
  constructor(shape: S, passthrough = false) {
    const keys = Object.keys(shape);
    const folded = new Map<string, string>();
    for (const k of keys) if (!folded.has(foldKey(k))) folded.set(foldKey(k), k);
    super('object', (v, path) => {
      if (!isPlainObject(v)) throw mismatch(path || '(config)', 'object', v);
      const raw = new Map<string, unknown>();
      const out: Record<string, unknown> = {};
      for (const [inKey, inVal] of Object.entries(v)) {
        const field = Object.hasOwn(shape, inKey) ? inKey : folded.get(foldKey(inKey));
        if (field === undefined) {
          if (passthrough) setOwn(out, inKey, inVal);
          continue;
        }
        // Go: null leaves the field as it was.
        if (inVal === null) continue;
        raw.set(field, inVal);
      }
      for (const k of keys) {
        const val = shape[k]!._run(raw.get(k), childPath(path, k));
        if (val !== undefined) out[k] = val;
      }
      return out as ObjectOf<S>;
    });
    this.shape = shape;
  }

  /** Keep keys not in the shape, unchanged, in the output. */
  passthrough(): Schema<ObjectOf<S> & Record<string, unknown>> {
    return new ObjectSchema(this.shape, true) as unknown as Schema<ObjectOf<S> & Record<string, unknown>>;
  }

  /** A new object schema with more (or replaced) fields. */
  extend<E extends Shape>(more: E): ObjectSchema<Omit<S, keyof E> & E> {
    return new ObjectSchema({ ...this.shape, ...more } as Omit<S, keyof E> & E);
  }
}

function intDecoder(name: string, opts: IntOptions): Decoder<number> {
  return (v, path) => {
    if (typeof v !== 'number') throw mismatch(path, name, v);
    if (!Number.isInteger(v)) throw mismatch(path, name, v);
    if (opts.min !== undefined && v < opts.min) {
      throw new CniError(
        ErrorCode.InvalidNetworkConfig,
        `${path}: ${v} is less than the minimum ${opts.min}`,
      );
    }
    if (opts.max !== undefined && v > opts.max) {
      throw new CniError(
        ErrorCode.InvalidNetworkConfig,
        `${path}: ${v} is greater than the maximum ${opts.max}`,
      );
    }
    return v;
  };
}

/** Schema constructors. */
export const s = {
  string(): Schema<string> {
    return new Schema('string', (v, path) => {
      if (typeof v !== 'string') throw mismatch(path, 'string', v);
      return v;
    });
  },
  number(): Schema<number> {
    return new Schema('number', (v, path) => {
      if (typeof v !== 'number') throw mismatch(path, 'number', v);
      return v;
    });
  },
  /** An integer (JSON number without fraction), optionally bounded. */
  int(opts: IntOptions = {}): Schema<number> {
    return new Schema('integer', intDecoder('integer', opts));
  },
  /** A non-negative integer (Go uint): negatives are rejected. */
  uint(opts: IntOptions = {}): Schema<number> {
    return new Schema(
      'unsigned integer',
      intDecoder('unsigned integer', { ...opts, min: Math.max(0, opts.min ?? 0) }),
    );
  },
  bool(): Schema<boolean> {
    return new Schema('boolean', (v, path) => {
      if (typeof v !== 'boolean') throw mismatch(path, 'boolean', v);
      return v;
    });
  },
  /** One of the given strings (case-sensitive). */
  enum<const V extends readonly [string, ...string[]]>(...values: V): Schema<V[number]> {
    return new Schema(values.map((x) => JSON.stringify(x)).join(' | '), (v, path) => {
      if (typeof v !== 'string') throw mismatch(path, 'string', v);
      if (!values.includes(v)) {
        throw new CniError(
          ErrorCode.InvalidNetworkConfig,
          `${path}: invalid value ${JSON.stringify(v)}, expected one of ${values.map((x) => JSON.stringify(x)).join(', ')}`,
        );
      }
      return v as V[number];
    });
  },
  /** A list; `null` elements decode to the element default (Go zero value semantics need a default). */
  array<T>(item: Schema<T>): Schema<T[]> {
    return new Schema(`array of ${item.typeName}`, (v, path) => {
      if (!Array.isArray(v)) throw mismatch(path, 'array', v);
      return v.map((x, i) => item._run(x, `${path}[${i}]`));
    });
  },
  object<S extends Shape>(shape: S): ObjectSchema<S> {
    return new ObjectSchema(shape);
  },
  /** An object with arbitrary keys whose values all follow `value`. */
  record<T>(value: Schema<T>): Schema<Record<string, T>> {
    return new Schema(`object of ${value.typeName}`, (v, path) => {
      if (!isPlainObject(v)) throw mismatch(path, 'object', v);
      const out: Record<string, T> = {};
      for (const [k, x] of Object.entries(v)) setOwn(out, k, value._run(x, childPath(path, k)));
      return out;
    });
  },
  /** Any JSON value, unchecked (null is kept as null). */
  any(): Schema<unknown> {
    return new Schema(
      'any',
      (v) => v,
      () => undefined,
    );
  },
};

/**
 * A schema built by `make` on first use, with the behaviour of the built one (`typeName` is given up front).
 * For module-level schemas that most process starts never use: building them costs start-up time.
 */
export function lazy<T>(typeName: string, make: () => Schema<T>): Schema<T> {
  let built: Schema<T> | undefined;
  const get = () => {
    built ??= make();
    return built;
  };
  const out = new Schema<T>(typeName, (v, path) => get()._dec(v, path));
  Object.defineProperty(out, '_fallback', { get: () => get()._fallback, enumerable: true });
  return out;
}

/**
 * Decode `value` with `schema`. `what` prefixes every error path (e.g. `'ipam'`).
 * Errors are `CniError` code 7 naming the key path.
 */
export function decode<T>(schema: Schema<T>, value: unknown, what = ''): T {
  return schema._run(value, what);
}

/**
 * Decode a plugin's network configuration like the reference's `loadConf`: every error reads
 * "<prefix>: <what went wrong>" (prefix `failed to load netconf`), code 6 (decoding failure) unless the error
 * has a more specific one (a schema error is 7). Paths are named from `config`.
 */
export function decodeNetconf<T>(schema: Schema<T>, value: unknown, prefix = 'failed to load netconf'): T {
  try {
    return decode(schema, value, 'config');
  } catch (err) {
    const e = CniError.from(err);
    throw new CniError(
      e.code === ErrorCode.Internal ? ErrorCode.DecodingFailure : e.code,
      `${prefix}: ${e.msg}`,
      e.details,
    );
  }
}
