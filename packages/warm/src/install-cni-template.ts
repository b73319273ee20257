/**
 * install-cni's templating: `${NAME}` / `${NAME:-default}` replaced by JSON-escaped environment values, every
 * unresolved reference named in one error, and the rendered conflist checked before anything is written.
 */
import { readFileSync } from 'node:fs';
import { InstallCniError } from './install-cni-error.ts';

const REF = /\$\{([^}]*)\}/g;
const REF_BODY = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s;

/** A JSON string's inner text for `v` (quotes, backslashes and control characters escaped). */
function jsonInner(v: string): string {
  return JSON.stringify(v).slice(1, -1);
}

/**
 * Render a template: every `${NAME}` / `${NAME:-default}` replaced by the JSON-escaped value of env NAME (or the
 * default when NAME is unset or empty). Throws InstallCniError naming every unresolved or malformed reference.
 */
export function renderTemplate(
  text: string,
  env: Readonly<Record<string, string | undefined>>,
  where = 'template',
): string {
  const problems: string[] = [];
  const out = text.replace(REF, (whole, body: string) => {
    const m = REF_BODY.exec(body);
    if (!m) {
      problems.push(`${whole} is not a variable reference (use \${NAME} or \${NAME:-default})`);
      return whole;
    }
    const name = m[1] as string;
    const value = env[name];
    if (value !== undefined && value !== '') return jsonInner(value);
    if (m[2] !== undefined) return jsonInner(m[2]);
    problems.push(`${whole}: environment variable ${name} is ${value === undefined ? 'not set' : 'empty'}`);
    return whole;
  });
  const stray = out.replace(REF, '').indexOf('${');
  if (stray >= 0 && problems.length === 0) problems.push(`unterminated \${ at offset ${stray}`);
  if (problems.length) throw new InstallCniError(`${where}: ${problems.join('; ')}; nothing was written`);
  return out;
}

/** The rendered conflist must be a conflist a runtime loads: name, cniVersion, a non-empty plugins list with types. */
export function checkConflist(text: string, where: string): { name: string; types: string[] } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new InstallCniError(`${where} is not valid JSON after substitution: ${(e as Error).message}`);
  }
  const o = v as Record<string, unknown>;
  if (!o || typeof o !== 'object' || Array.isArray(o))
    throw new InstallCniError(`${where}: a conflist is a JSON object`);
  if (typeof o.name !== 'string' || !o.name) throw new InstallCniError(`${where}: "name" must be a string`);
  if (typeof o.cniVersion !== 'string') throw new InstallCniError(`${where}: "cniVersion" must be a string`);
  if (!Array.isArray(o.plugins) || o.plugins.length === 0)
    throw new InstallCniError(`${where}: "plugins" must be a non-empty list`);
  const types = o.plugins.map((p, i) => {
    const t = (p as Record<string, unknown> | null)?.type;
    if (typeof t !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(t))
      throw new InstallCniError(`${where}: plugins[${i}].type must be a plugin file name`);
    return t;
  });
  return { name: o.name, types };
}

export function readTemplate(template: string): string {
  try {
    return readFileSync(template, 'utf8');
  } catch (e) {
    throw new InstallCniError(`cannot read the template ${template}: ${(e as Error).message}`);
  }
}

/** Render the template into the conflist bytes (or undefined without a template). */
export function renderConf(o: {
  template: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
}): Buffer | undefined {
  if (o.template === undefined) return undefined;
  const text = readTemplate(o.template);
  const rendered = renderTemplate(text, o.env, o.template);
  checkConflist(rendered, `${o.template} (rendered)`);
  return Buffer.from(rendered.endsWith('\n') ? rendered : `${rendered}\n`);
}
