/** Delegation to other plugins found in CNI_PATH (spec §14b), with in-process short-cut. */
import type { Plugin, Request, Result } from './types.ts';

const registry = new Map<string, Plugin>();

/** Register a plugin that may be run in-process when a delegate resolves to this executable. */
export function registerInProcess(plugin: Plugin): void {
  registry.set(plugin.name, plugin);
}

export async function delegateAdd(type: string, req: Request): Promise<Result> {
  void type;
  void req;
  throw new Error('not implemented yet');
}
export async function delegateDel(type: string, req: Request): Promise<void> {
  void type;
  void req;
}
export async function delegateCheck(type: string, req: Request): Promise<void> {
  void type;
  void req;
}
export async function delegateStatus(type: string, req: Request): Promise<void> {
  void type;
  void req;
}
export async function delegateGc(type: string, req: Request): Promise<void> {
  void type;
  void req;
}

/** ADD the delegate, run `fn` with its result; if `fn` fails, DEL the delegate and rethrow. */
export async function withDelegateCleanup<T>(
  type: string,
  req: Request,
  fn: (result: Result) => T | Promise<T>,
): Promise<T> {
  const r = await delegateAdd(type, req);
  try {
    return await fn(r);
  } catch (e) {
    await delegateDel(type, req).catch(() => undefined);
    throw e;
  }
}
