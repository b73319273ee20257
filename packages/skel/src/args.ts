/**
 * CNI_ARGS (`K=V;K2=V2`) with Go `types.LoadArgs` semantics (spec §9):
 * - '' → nothing; split on every ';', each piece must split on '=' into exactly two parts
 *   (`ARGS: invalid pair "<piece>"`); no trimming, no escaping;
 * - keys match field names case-sensitively; unknown pieces are collected and are an error
 *   (`ARGS: unknown args ["A=1" "B=2"]`) unless `IgnoreUnknown` is true;
 * - `IgnoreUnknown` (always known) and `'bool'` fields accept 1/true/0/false in any case, otherwise
 *   `ARGS: error parsing value of pair "<piece>": boolean unmarshal error: invalid input <lower>`;
 * - duplicate known keys: the last wins.
 * Errors are plain `Error`s: a handler that lets them escape answers with code 999, like Go plugins.
 *
 * ```ts
 * const args = loadArgs(req.args, { IP: 'string', MAC: 'string', K8S_POD_NAME: 'string' });
 * args.IP; // string | undefined
 * ```
 */
import { goQuote, goQuoteList } from './version.ts';

/** How a field's text is parsed: verbatim string, Go-style bool, or a custom parser (throw on error). */
export type ArgField = 'string' | 'bool' | ((text: string) => unknown);

export type ArgsOf<F extends Record<string, ArgField>> = { IgnoreUnknown: boolean } & {
  -readonly [K in keyof F]?: F[K] extends 'bool'
    ? boolean
    : F[K] extends 'string'
      ? string
      : F[K] extends (text: string) => infer T
        ? T
        : never;
};

/** Go `types.UnmarshallableBool`. */
export function parseArgBool(text: string): boolean {
  const s = text.toLowerCase();
  if (s === '1' || s === 'true') return true;
  if (s === '0' || s === 'false') return false;
  throw new Error(`boolean unmarshal error: invalid input ${s}`);
}

export function loadArgs<const F extends Record<string, ArgField>>(cniArgs: string, fields: F): ArgsOf<F> {
  const out: Record<string, unknown> = { IgnoreUnknown: false };
  if (cniArgs === '') return out as ArgsOf<F>;
  const unknown: string[] = [];
  for (const pair of cniArgs.split(';')) {
    const kv = pair.split('=');
    if (kv.length !== 2) throw new Error(`ARGS: invalid pair ${goQuote(pair)}`);
    const [key, value] = kv as [string, string];
    const kind: ArgField | undefined =
      key === 'IgnoreUnknown' && !Object.hasOwn(fields, key)
        ? 'bool'
        : Object.hasOwn(fields, key)
          ? fields[key]
          : undefined;
    if (kind === undefined || key === '') {
      unknown.push(pair);
      continue;
    }
    try {
      out[key] = kind === 'string' ? value : kind === 'bool' ? parseArgBool(value) : kind(value);
    } catch (e) {
      const cause = e instanceof Error ? e.message : String(e);
      throw new Error(`ARGS: error parsing value of pair ${goQuote(pair)}: ${cause}`);
    }
  }
  if (unknown.length > 0 && out.IgnoreUnknown !== true)
    throw new Error(`ARGS: unknown args ${goQuoteList(unknown)}`);
  return out as ArgsOf<F>;
}
