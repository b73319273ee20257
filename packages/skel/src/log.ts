/**
 * Plugin logging: stderr (never stdout), optionally also appended to a file.
 *
 * File: option `logFile`, else the config key `logFile` (case-insensitive), else env `CNIKIT_LOG_FILE`.
 * Level: option `level`, else config key `logLevel`, else env `CNIKIT_LOG_LEVEL`; one of
 * debug | info | warn | error | none (default `warn` on stderr; the file gets the same level).
 * A failing log file is ignored (logging never breaks a plugin).
 * When the environment carries a W3C trace context (TRACEPARENT, set by a runtime as Go's libcni does), every line
 * names its trace id (`trace=<32 hex>`), so plugin logs can be matched to the runtime's trace.
 */
import { appendFileSync } from 'node:fs';
import { format } from 'node:util';
import type { Logger } from './types.ts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'none';
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, none: 100 };

export interface LoggerOptions {
  logFile?: string;
  level?: LogLevel;
  /** Where stderr lines go (default process.stderr). */
  stderr?: { write(s: string): unknown };
  /** Environment to read CNIKIT_LOG_FILE / CNIKIT_LOG_LEVEL from (default process.env). */
  env?: Readonly<Record<string, string | undefined>>;
}

function configKey(config: unknown, key: string): unknown {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return undefined;
  const rec = config as Record<string, unknown>;
  if (Object.hasOwn(rec, key)) return rec[key];
  const lower = key.toLowerCase();
  for (const k of Object.keys(rec)) if (k.toLowerCase() === lower) return rec[k];
  return undefined;
}

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The trace id of a valid W3C `traceparent` value (not all zeros), else undefined. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  const id = traceparent ? TRACEPARENT.exec(traceparent.trim())?.[1] : undefined;
  return id && !/^0+$/.test(id) ? id : undefined;
}

function asLevel(v: unknown): LogLevel | undefined {
  if (typeof v !== 'string') return undefined;
  const l = v.toLowerCase();
  return l in RANK ? (l as LogLevel) : undefined;
}

export interface FullLogger extends Logger {
  readonly level: LogLevel;
  readonly logFile: string | undefined;
  child(name: string): FullLogger;
}

/**
 * A logger for plugin `name`. `config` is the plugin's config (NetConf), read for `logFile` / `logLevel`;
 * `options` override both (and inject stderr/env for tests).
 */
export function createLogger(name: string, config?: unknown, options: LoggerOptions = {}): FullLogger {
  const env = options.env ?? process.env;
  const cfgFile = configKey(config, 'logFile');
  const logFile =
    options.logFile ??
    (typeof cfgFile === 'string' && cfgFile !== '' ? cfgFile : undefined) ??
    (env.CNIKIT_LOG_FILE || undefined);
  const level =
    options.level ?? asLevel(configKey(config, 'logLevel')) ?? asLevel(env.CNIKIT_LOG_LEVEL) ?? 'warn';
  const stderr = options.stderr ?? process.stderr;
  const min = RANK[level];
  const traceId = traceIdOf(env.TRACEPARENT);
  const tag = traceId ? ` trace=${traceId}` : '';
  const emit = (lvl: Exclude<LogLevel, 'none'>, msg: string, args: unknown[]) => {
    if (RANK[lvl] < min) return;
    const text = args.length ? format(msg, ...args) : msg;
    const line = `${new Date().toISOString()} ${lvl.toUpperCase()} ${name}[${process.pid}]${tag}: ${text}\n`;
    try {
      stderr.write(line);
    } catch {
      // stderr closed: nothing to do
    }
    if (logFile) {
      try {
        appendFileSync(logFile, line, { mode: 0o600 });
      } catch {
        // ignore an unwritable log file
      }
    }
  };
  return {
    level,
    logFile,
    debug: (m, ...a) => emit('debug', m, a),
    info: (m, ...a) => emit('info', m, a),
    warn: (m, ...a) => emit('warn', m, a),
    error: (m, ...a) => emit('error', m, a),
    child: (sub) => createLogger(`${name}/${sub}`, undefined, { ...options, logFile, level, stderr, env }),
  };
}
