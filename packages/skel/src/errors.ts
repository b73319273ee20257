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
