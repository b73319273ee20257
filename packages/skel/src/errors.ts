/**
 * CNI error objects. `CniError` is branded with a global symbol so that `CniError.is(x)` and
 * `x instanceof CniError` hold across two bundled copies of the SDK.
 */

/** Spec well-known error codes (0–99 reserved; 100+ plugin specific). */
export const ErrorCode = {
  /** Go's ErrUnknown: a delegate failed without a parseable error object. */
  Unknown: 0,
  IncompatibleCNIVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnvironmentVariables: 4,
  IOFailure: 5,
  DecodingFailure: 6,
  InvalidNetworkConfig: 7,
  /** Go-only: CNI_NETNS is the plugin's own namespace. */
  InvalidNetNS: 8,
  TryAgainLater: 11,
  /** STATUS: the plugin cannot service ADD. */
  PluginNotAvailable: 50,
  /** STATUS: not available and existing containers may have limited connectivity. */
  LimitedConnectivity: 51,
  /** Any other error thrown by plugin code. */
  Internal: 999,
} as const;

const BRAND = Symbol.for('cnikit.CniError');

export interface CniErrorJSON {
  code: number;
  msg: string;
  details?: string;
}

export class CniError extends Error {
  readonly code: number;
  readonly msg: string;
  readonly details: string;

  constructor(code: number, msg: string, details = '', options?: { cause?: unknown }) {
    super(details ? `${msg}; ${details}` : msg, options);
    this.name = 'CniError';
    this.code = code;
    this.msg = msg;
    this.details = details;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** True for any CniError, including one created by another bundled copy of the SDK. */
  static is(value: unknown): value is CniError {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return CniError.is(value);
  }

  /**
   * Wrap anything thrown into a CniError exactly once: CniErrors pass unchanged, other errors
   * become code 999 with their message.
   */
  static from(err: unknown, code: number = ErrorCode.Internal): CniError {
    if (CniError.is(err)) return err;
    const msg = err instanceof Error ? err.message : String(err);
    return new CniError(code, msg, '', { cause: err });
  }

  toJSON(): CniErrorJSON {
    return this.details
      ? { code: this.code, msg: this.msg, details: this.details }
      : { code: this.code, msg: this.msg };
  }
}

/**
 * The Go-style text of anything thrown: a CniError's `msg`, a system error's `reason` (`file exists`, as Go
 * prints a syscall errno), else the message.
 *
 * Layering: the rule for non-CniErrors is @cnikit/sys's `SysError.reasonOf` (the definition, beside the `reason`
 * it reads; netlink and firewall, which do not depend on skel, call it). skel itself does not depend on @cnikit/sys
 * — the protocol core must install and bundle without the native addon — so it reads the same `reason` contract
 * here; `errors.test.ts` checks that both give the same text.
 */
export function errorReason(err: unknown): string {
  if (CniError.is(err)) return err.msg;
  const r = (err as { reason?: unknown } | null)?.reason;
  if (typeof r === 'string' && r) return r;
  return err instanceof Error ? err.message : String(err);
}

/** A code-999 error (what Go's `fmt.Errorf` becomes through skel), keeping the underlying error as `cause`. */
export function internalError(msg: string, cause?: unknown): CniError {
  return new CniError(ErrorCode.Internal, msg, '', cause === undefined ? undefined : { cause });
}

/**
 * Run `fn`; if it throws, throw `internalError("<message>: <reason>")` with the original as cause — the
 * TypeScript spelling of Go's `if err != nil { return fmt.Errorf("message: %v", err) }`. Synchronous only
 * (a returned Promise is rejected as a bug); use `wrapAsync` for async work.
 */
export function wrap<T>(message: string, fn: () => T): T {
  let out: T;
  try {
    out = fn();
  } catch (err) {
    throw internalError(`${message}: ${errorReason(err)}`, err);
  }
  if (out instanceof Promise)
    throw new TypeError(`wrap(${JSON.stringify(message)}): use wrapAsync for async work`);
  return out;
}

/** `wrap` for async work. */
export async function wrapAsync<T>(message: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw internalError(`${message}: ${errorReason(err)}`, err);
  }
}

/**
 * Errors of a teardown (DEL, GC, rollback) that keeps going after a failure and reports every failure at the
 * end (netavark's NetavarkErrorList). `run(what, fn)` records a failure instead of throwing it (the message is
 * prefixed with `what` when given); `throwIfAny()` throws nothing, the single error unchanged, or one
 * CniError with the first error's code and every message on its own line.
 */
/** How `ErrorList.combined` / `throwIfAny` shape the one error (see there). */
export interface ErrorListFormat {
  code?: number;
  separator?: string;
  prefix?: string;
}

export class ErrorList {
  readonly errors: CniError[] = [];

  /** Record a failure (wrapped once with CniError.from). */
  add(err: unknown, what = ''): void {
    const e = CniError.from(err);
    this.errors.push(what ? new CniError(e.code, `${what}: ${e.msg}`, e.details, { cause: err }) : e);
  }

  /** Run one synchronous or asynchronous step; a failure is recorded, never thrown. */
  run(what: string, fn: () => void): void;
  run(what: string, fn: () => Promise<unknown>): Promise<void>;
  run(what: string, fn: () => unknown): void | Promise<void> {
    let out: unknown;
    try {
      out = fn();
    } catch (err) {
      this.add(err, what);
      return;
    }
    if (out instanceof Promise)
      return out.then(
        () => undefined,
        (err) => this.add(err, what),
      );
  }

  get length(): number {
    return this.errors.length;
  }

  /**
   * One error for all the failures, or undefined. Without options: the single error unchanged, or the first
   * error's code and details with every message on its own line. Options give the plugin's own shape (e.g. the
   * reference's `strings.Join(errs, ";")`): `code` replaces the errors' codes and details, `separator` joins the
   * messages, `prefix` starts the text; with any of them the result is a new error even for one failure.
   */
  combined(opts: ErrorListFormat = {}): CniError | undefined {
    const first = this.errors[0];
    if (!first) return undefined;
    const plain = opts.code === undefined && opts.separator === undefined && opts.prefix === undefined;
    if (plain && this.errors.length === 1) return first;
    const msg = `${opts.prefix ?? ''}${this.errors.map((e) => e.msg).join(opts.separator ?? '\n')}`;
    return new CniError(opts.code ?? first.code, msg, opts.code === undefined ? first.details : '', {
      cause: this.errors.length === 1 ? first : new AggregateError(this.errors),
    });
  }

  throwIfAny(opts: ErrorListFormat = {}): void {
    const e = this.combined(opts);
    if (e) throw e;
  }
}

/**
 * What a call has changed so far, undone in reverse order when it fails, so that a failed ADD leaves nothing
 * behind: `push(what, undo)` after each change, `undoAll(log)` in the failure path. Every undo step runs even
 * when an earlier one fails; failures are logged as warnings (`rollback: <what> failed: <reason>`), never thrown,
 * so the original error is what the runtime sees. Async steps are awaited.
 */
export class Rollback {
  private readonly steps: Array<[string, () => unknown]> = [];

  push(what: string, undo: () => unknown): void {
    this.steps.push([what, undo]);
  }

  get length(): number {
    return this.steps.length;
  }

  async undoAll(log: { warn(msg: string, ...args: unknown[]): void }): Promise<void> {
    for (const [what, fn] of this.steps.splice(0).reverse()) {
      try {
        await fn();
      } catch (err) {
        log.warn('rollback: %s failed: %s', what, errorReason(err));
      }
    }
  }

  /** `undoAll` for synchronous steps (a step returning a Promise is a bug and is logged as a failure). */
  undoAllSync(log: { warn(msg: string, ...args: unknown[]): void }): void {
    for (const [what, fn] of this.steps.splice(0).reverse()) {
      try {
        if (fn() instanceof Promise) throw new TypeError('asynchronous undo step: use undoAll');
      } catch (err) {
        log.warn('rollback: %s failed: %s', what, errorReason(err));
      }
    }
  }
}
