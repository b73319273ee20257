/** The dispatcher: env + stdin → validation → version negotiation → handler → stdout (spec §2–§8). */
import { CniError } from './errors.ts';
import type { Plugin } from './types.ts';

export interface PluginIO {
  env: Record<string, string | undefined>;
  /** The config bytes, or a reader called only when stdin must be read (VERSION never reads it). */
  stdin: Uint8Array | string | (() => Uint8Array);
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
}

export async function dispatch(plugin: Plugin, io: PluginIO): Promise<number> {
  void plugin;
  void io;
  io.stdout.write(JSON.stringify(new CniError(999, 'not implemented yet').toJSON(), null, 4));
  return 1;
}

export interface InProcessResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function invokeInProcess(
  plugin: Plugin,
  env: Record<string, string | undefined>,
  stdin: Uint8Array | string = '',
): Promise<InProcessResult> {
  let stdout = '';
  let stderr = '';
  const code = await dispatch(plugin, {
    env,
    stdin,
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stdout, stderr };
}

export async function runPlugin(plugin: Plugin): Promise<void> {
  const code = await dispatch(plugin, {
    env: process.env,
    stdin: () => new Uint8Array(),
    stdout: process.stdout,
    stderr: process.stderr,
  });
  process.exitCode = code;
}
