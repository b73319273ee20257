/**
 * What a check ends with besides its summary line (Fail: expected/actual and the calls that show it; Skip: why it
 * did not apply) and the helpers that read a failed call's output. Shared by the harness and the check bodies.
 */
import type { CallRecord } from './kit-types.ts';

export class Fail extends Error {
  constructor(
    readonly expected: string,
    readonly actual: string,
    readonly calls: CallRecord[] = [],
  ) {
    super(`expected ${expected}; actual ${actual}`);
  }
}
export class Skip extends Error {}

// biome-ignore lint/suspicious/noExplicitAny: JSON
export type Json = any;

const STACK =
  /\n\s+at .+[(:]\d+:\d+\)?|goroutine \d+ \[|panic: |Traceback \(most recent call last\)|\n\s+at \S+:\d+/;

/** Problems of a failed call's output: exactly one error object, no stack trace (empty when fine). */
export function errorObjectProblems(o: { code: number; stdout: string }): string[] {
  const p: string[] = [];
  if (o.code === 0) p.push('exit status 0');
  let j: Json;
  try {
    j = JSON.parse(o.stdout);
  } catch {
    if (STACK.test(o.stdout)) p.push('a stack trace on stdout');
    p.push(
      o.stdout.trim() === ''
        ? 'nothing on stdout'
        : `stdout is not one JSON object: ${JSON.stringify(o.stdout.slice(0, 300))}`,
    );
    return p;
  }
  if (!j || typeof j !== 'object' || Array.isArray(j)) {
    p.push(`stdout is JSON but not an object: ${o.stdout.slice(0, 200)}`);
    return p;
  }
  if (typeof j.code !== 'number') p.push('the error object has no numeric code');
  if (typeof j.msg !== 'string') p.push('the error object has no msg string');
  const extra = Object.keys(j).filter((k) => !['code', 'msg', 'details', 'cniVersion'].includes(k));
  if (extra.length) p.push(`the error object has other keys: ${extra.join(', ')}`);
  if (STACK.test(o.stdout)) p.push('a stack trace on stdout');
  return p;
}

export function errCode(o: { stdout: string }): number | undefined {
  try {
    const j = JSON.parse(o.stdout);
    return typeof j?.code === 'number' ? j.code : undefined;
  } catch {
    return undefined;
  }
}

export function short(o: { code: number; stdout: string; stderr: string }): string {
  const out = o.stdout.trim();
  const err = o.stderr.trim();
  return `exit ${o.code}; stdout ${out ? out.slice(0, 400) : '(empty)'}${err ? `; stderr ${err.slice(0, 300)}` : ''}`;
}
