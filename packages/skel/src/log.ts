/**
 * Plugin logging: stderr (never stdout), optionally also appended to a file.
 *
 * File: option `logFile`, else the config key `logFile` (case-insensitive), else env `CNIKIT_LOG_FILE`.
 * Level: option `level`, else config key `logLevel`, else env `CNIKIT_LOG_LEVEL`; one of
 * debug | info | warn | error | none (default `warn` on stderr; the file gets the same level).
 * A failing log file is ignored (logging never breaks a plugin).
 * When the environment carries a W3C trace context (TRACEPARENT, set by a runtime as Go's libcni does), every line
 * names its trace id (`trace=<32 hex>`), so plugin logs can be matched to the runtime's trace.
 * Format: option `format`, else config key `logFormat`, else env `CNIKIT_LOG_FORMAT`: `text` (default, the line
 * above) or `json` — one JSON object per line: `time`, `level`, `plugin`, `pid`, `msg`, and when known `trace_id`,
 * `span_id` (the caller's span), `verb` (CNI_COMMAND) and `container_id` (CNI_CONTAINERID).
 */
import { appendFileSync } from 'node:fs';
import { format } from 'node:util';
import type { Logger } from './types.ts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'none';
export type LogFormat = 'text' | 'json';
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, none: 100 };

export interface LoggerOptions {
  logFile?: string;
  level?: LogLevel;
  format?: LogFormat;
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

function asFormat(v: unknown): LogFormat | undefined {
  if (typeof v !== 'string') return undefined;
  const f = v.trim().toLowerCase();
  return f === 'json' || f === 'text' ? f : undefined;
}

function asLevel(v: unknown): LogLevel | undefined {
  if (typeof v !== 'string') return undefined;
  const l = v.toLowerCase();
  return l in RANK ? (l as LogLevel) : undefined;
}

export interface FullLogger extends Logger {
  readonly level: LogLevel;
  readonly logFile: string | undefined;
  readonly format: LogFormat;
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
  const fmt =
    options.format ?? asFormat(configKey(config, 'logFormat')) ?? asFormat(env.CNIKIT_LOG_FORMAT) ?? 'text';
  const traceId = traceIdOf(env.TRACEPARENT);
  const tag = traceId ? ` trace=${traceId}` : '';
  // the JSON fields every line of this logger carries, in a fixed order
  const fields: Record<string, string | number> = { plugin: name, pid: process.pid };
  if (traceId) {
    fields.trace_id = traceId;
    fields.span_id = (env.TRACEPARENT as string).trim().slice(36, 52);
  }
  if (env.CNI_COMMAND) fields.verb = env.CNI_COMMAND;
  if (env.CNI_CONTAINERID) fields.container_id = env.CNI_CONTAINERID;
  const emit = (lvl: Exclude<LogLevel, 'none'>, msg: string, args: unknown[]) => {
    if (RANK[lvl] < min) return;
    const text = args.length ? format(msg, ...args) : msg;
    const time = new Date().toISOString();
    const line =
      fmt === 'json'
        ? `${JSON.stringify({ time, level: lvl, ...fields, msg: text })}\n`
        : `${time} ${lvl.toUpperCase()} ${name}[${process.pid}]${tag}: ${text}\n`;
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
    format: fmt,
    debug: (m, ...a) => emit('debug', m, a),
    info: (m, ...a) => emit('info', m, a),
    warn: (m, ...a) => emit('warn', m, a),
    error: (m, ...a) => emit('error', m, a),
    child: (sub) =>
      createLogger(`${name}/${sub}`, undefined, { ...options, logFile, level, format: fmt, stderr, env }),
  };
}
