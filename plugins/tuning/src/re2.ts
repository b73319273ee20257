/**
 * Go `regexp` (RE2 syntax) → JavaScript RegExp, for tuning's sysctl allow-list. Every construct is either
 * translated to a JavaScript pattern that matches exactly the same strings, or rejected with the error Go's
 * parser gives (`error parsing regexp: …`) or, for valid RE2 that has no faithful JavaScript spelling here, a
 * `cannot translate` error — never accepted with a different meaning.
 *
 * Semantics kept: unanchored search (`MatchString`), `.` not matching `\n`, `^`/`$` at text start/end only
 * (JavaScript's default without the `m` flag), ASCII `\d \w \s \b` (Go's `\s` is `[\t\n\f\r ]`), Perl/POSIX
 * classes, `\Q…\E`, `\A`, `\z`, flag groups `(?i)`, `(?s)`, `(?m)` at the start of the expression,
 * `(?P<name>…)`, repeat counts ≤ 1000. Rejected like Go: backreferences, lookaround, `\Z`, unknown escapes,
 * nested repetition operators. Rejected as untranslatable: flags set in the middle of an expression, `(?U)`,
 * Unicode classes `\p…`.
 */

export class RegexpError extends Error {}

function goError(code: string, expr: string): RegexpError {
  return new RegexpError(`error parsing regexp: ${code}: \`${expr}\``);
}

function untranslatable(what: string, expr: string): RegexpError {
  return new RegexpError(`cannot translate regexp \`${expr}\` to JavaScript: ${what} is not supported`);
}

const POSIX: Record<string, string> = {
  alnum: '0-9A-Za-z',
  alpha: 'A-Za-z',
  ascii: '\\x00-\\x7f',
  blank: '\\t ',
  cntrl: '\\x00-\\x1f\\x7f',
  digit: '0-9',
  graph: '!-~',
  lower: 'a-z',
  print: ' -~',
  punct: '!-\\/:-@\\[-`{-~',
  space: '\\t\\n\\v\\f\\r ',
  upper: 'A-Z',
  word: '0-9A-Za-z_',
  xdigit: '0-9A-Fa-f',
};

const PERL_IN_CLASS: Record<string, string> = {
  d: '0-9',
  w: '0-9A-Za-z_',
  s: '\\t\\n\\f\\r ',
};
const PERL_NEGATED: Record<string, string> = { D: 'd', W: 'w', S: 's' };

function hexEscape(cp: number): string {
  return cp <= 0xff ? `\\x${cp.toString(16).padStart(2, '0')}` : `\\u{${cp.toString(16)}}`;
}

/** Translate one RE2 expression to a JavaScript RegExp with the same matches. */
export function re2ToRegExp(expr: string): RegExp {
  let i = 0;
  let out = '';
  let flags = '';
  // leading flag groups: (?i) (?s) (?m) (?is) … — apply to the whole expression
  for (;;) {
    const m = /^\(\?([a-zA-Z-]*)\)/.exec(expr.slice(i));
    if (!m) break;
    const f = m[1] as string;
    if (!/^[imsU]*$/.test(f) || f === '') throw goError('invalid or unsupported Perl syntax', m[0]);
    if (f.includes('U')) throw untranslatable('the ungreedy flag (?U)', expr);
    for (const c of f) if (!flags.includes(c)) flags += c;
    i += m[0].length;
  }
  // Go's (?m) makes ^/$ line anchors: JavaScript's m flag; (?s): dotAll; (?i): case-insensitive.
  let lastWasRepeatable = false;
  let lastWasRepeat = false;
  const parenStack: number[] = [];

  const escapeAt = (inClass: boolean): string => {
    // expr[i] === '\\'
    const c = expr[i + 1];
    if (c === undefined) throw goError('trailing backslash at end of expression', '');
    i += 2;
    // \1-\7 followed by an octal digit, or \0: octal (up to 3 digits); a lone \1-\9 is a backreference (Go: error)
    if (/[1-9]/.test(c) && !(c <= '7' && /[0-7]/.test(expr[i] ?? '')))
      throw goError('invalid escape sequence', `\\${c}`);
    if (c === '0' || (c >= '1' && c <= '7')) {
      // octal \0, \012 (up to 3 digits)
      let j = i;
      while (j < expr.length && j < i + 2 && /[0-7]/.test(expr[j] as string)) j++;
      const cp = Number.parseInt(expr.slice(i - 1, j), 8);
      i = j;
      return hexEscape(cp);
    }
    switch (c) {
      case 'a':
        return '\\x07';
      case 'f':
        return '\\f';
      case 't':
        return '\\t';
      case 'n':
        return '\\n';
      case 'r':
        return '\\r';
      case 'v':
        return '\\v';
      case 'x': {
        if (expr[i] === '{') {
          const end = expr.indexOf('}', i);
          const hex = end < 0 ? '' : expr.slice(i + 1, end);
          if (!/^[0-9a-fA-F]{1,8}$/.test(hex) || Number.parseInt(hex, 16) > 0x10ffff)
            throw goError('invalid escape sequence', `\\x${expr.slice(i, end < 0 ? undefined : end + 1)}`);
          i = end + 1;
          return hexEscape(Number.parseInt(hex, 16));
        }
        const hex = expr.slice(i, i + 2);
        if (!/^[0-9a-fA-F]{2}$/.test(hex)) throw goError('invalid escape sequence', `\\x${hex}`);
        i += 2;
        return hexEscape(Number.parseInt(hex, 16));
      }
      case 'd':
      case 'w':
      case 's':
        return inClass ? (PERL_IN_CLASS[c] as string) : `[${PERL_IN_CLASS[c]}]`;
      case 'D':
      case 'W':
      case 'S':
        if (inClass) throw untranslatable(`\\${c} inside a character class`, expr);
        return `[^${PERL_IN_CLASS[PERL_NEGATED[c] as string]}]`;
      case 'b':
      case 'B':
        if (inClass) throw goError('invalid escape sequence', `\\${c}`);
        return `\\${c}`;
      case 'A':
        if (inClass) throw goError('invalid escape sequence', '\\A');
        return '(?<![\\s\\S])';
      case 'z':
        if (inClass) throw goError('invalid escape sequence', '\\z');
        return '(?![\\s\\S])';
      case 'p':
      case 'P':
        throw untranslatable('Unicode class \\p / \\P', expr);
      case 'Q': {
        if (inClass) throw goError('invalid escape sequence', '\\Q');
        const end = expr.indexOf('\\E', i);
        const lit = end < 0 ? expr.slice(i) : expr.slice(i, end);
        i = end < 0 ? expr.length : end + 2;
        let text = '';
        for (const ch of lit) text += /[0-9A-Za-z]/.test(ch) ? ch : hexEscape(ch.codePointAt(0) as number);
        return text;
      }
      default:
        // punctuation escapes are literals in both dialects; anything else (\k, \c, \u, \Z, \e…) Go rejects
        if (/[!-/:-@[-`{-~]/.test(c)) return hexEscape(c.charCodeAt(0));
        throw goError('invalid escape sequence', `\\${c}`);
    }
  };

  const classAt = (): string => {
    // expr[i] === '['
    const start = i;
    i++;
    let body = '';
    if (expr[i] === '^') {
      body += '^';
      i++;
    }
    let first = true;
    for (;;) {
      const c = expr[i];
      if (c === undefined) throw goError('missing closing ]', expr.slice(start));
      if (c === ']' && !first) {
        i++;
        break;
      }
      first = false;
      if (c === '[' && expr[i + 1] === ':') {
        const end = expr.indexOf(':]', i + 2);
        const name = end < 0 ? '' : expr.slice(i + 2, end);
        const neg = name.startsWith('^');
        const cls = POSIX[neg ? name.slice(1) : name];
        if (end >= 0 && cls !== undefined) {
          if (neg) throw untranslatable('a negated POSIX class inside a character class', expr);
          body += cls;
          i = end + 2;
          continue;
        }
        if (end >= 0) throw goError('invalid character class range', expr.slice(i, end + 2));
      }
      if (c === '\\') {
        body += escapeAt(true);
        continue;
      }
      // JavaScript needs these escaped inside a class to mean themselves ('[' is literal in RE2 classes)
      body += c === ']' || c === '[' || c === '/' ? `\\${c}` : c;
      i++;
    }
    return `[${body}]`;
  };

  while (i < expr.length) {
    const c = expr[i] as string;
    if (c === '\\') {
      out += escapeAt(false);
      lastWasRepeatable = true;
      lastWasRepeat = false;
      continue;
    }
    if (c === '[') {
      out += classAt();
      lastWasRepeatable = true;
      lastWasRepeat = false;
      continue;
    }
    if (c === '(') {
      if (expr[i + 1] === '?') {
        const rest = expr.slice(i);
        const named = /^\(\?P?<([A-Za-z0-9_]+)>/.exec(rest);
        if (named) {
          out += `(?<${named[1]}>`;
          i += named[0].length;
        } else if (rest.startsWith('(?:')) {
          out += '(?:';
          i += 3;
        } else if (/^\(\?[imsU-]+[:)]/.test(rest)) {
          throw untranslatable('a flag group after the start of the expression', expr);
        } else {
          throw goError('invalid or unsupported Perl syntax', rest.slice(0, 3));
        }
      } else {
        out += '(';
        i++;
      }
      parenStack.push(i);
      lastWasRepeatable = false;
      lastWasRepeat = false;
      continue;
    }
    if (c === ')') {
      if (parenStack.length === 0) throw goError('unexpected )', expr);
      parenStack.pop();
      out += ')';
      i++;
      lastWasRepeatable = true;
      lastWasRepeat = false;
      continue;
    }
    if (c === '*' || c === '+' || c === '?' || c === '{') {
      let op = c;
      if (c === '{') {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(expr.slice(i));
        if (!m) {
          // not a repeat: a literal brace in RE2
          out += '\\{';
          i++;
          lastWasRepeatable = true;
          lastWasRepeat = false;
          continue;
        }
        const lo = Number(m[1]);
        const hi = m[3] === undefined || m[3] === '' ? lo : Number(m[3]);
        if (lo > 1000 || hi > 1000 || (m[3] !== undefined && m[3] !== '' && hi < lo))
          throw goError('invalid repeat count', m[0]);
        op = m[0];
      }
      if (lastWasRepeat)
        throw goError('invalid nested repetition operator', expr.slice(i - 1, i + op.length));
      if (!lastWasRepeatable) throw goError('missing argument to repetition operator', op);
      i += op.length;
      if (expr[i] === '?') {
        op += '?';
        i++;
      }
      out += op;
      lastWasRepeat = true;
      continue;
    }
    if (c === '|') {
      out += '|';
      i++;
      lastWasRepeatable = false;
      lastWasRepeat = false;
      continue;
    }
    if (c === '^' || c === '$') {
      // (?m): line anchors at '\n' only (JavaScript's m flag also breaks lines at \r, U+2028, U+2029)
      out += flags.includes('m') ? (c === '^' ? '(?<![^\\n])' : '(?![^\\n])') : c;
      i++;
      lastWasRepeatable = true; // Go allows `^*` (an empty-width repeat)
      lastWasRepeat = false;
      continue;
    }
    // Go's '.' excludes only '\n' (JavaScript's also excludes \r, U+2028, U+2029)
    if (c === '.') out += flags.includes('s') ? '[\\s\\S]' : '[^\\n]';
    else out += c === '/' || c === ']' || c === '}' ? `\\${c}` : c;
    i++;
    lastWasRepeatable = true;
    lastWasRepeat = false;
  }
  if (parenStack.length) throw goError('missing closing )', expr);
  try {
    // 'u': Unicode code points and simple case folding, like Go; '.', '^' and '$' were spelled out above
    return new RegExp(out, `${flags.includes('i') ? 'i' : ''}u`);
  } catch (err) {
    throw untranslatable(`the translation /${out}/ (${(err as Error).message})`, expr);
  }
}
