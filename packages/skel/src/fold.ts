/**
 * The small rules of Go's encoding/json that the VERSION answer needs, with no imports (the start-up path of an
 * executable loads this module and nothing else of the SDK's JSON code): Go's case folding for JSON keys (simple
 * Unicode folding ≈ lower-casing; U+017F long s folds to 's' and U+212A Kelvin to 'k', as in Go) and its escaping of
 * HTML characters in marshalled text.
 */
export function foldKey(s: string): string {
  const l = s.toLowerCase();
  return l.indexOf('\u017f') < 0 ? l : l.replace(/\u017f/g, 's');
}

/** What encoding/json does to `<`, `>`, `&`, U+2028 and U+2029 in marshalled text (`\u003c` …). */
export function goEscapeJSON(text: string): string {
  // five searches in native code rather than a loop the interpreter runs per character: a VERSION answer at start-up
  // runs this once, cold (callgrind: ~50 k instructions less)
  if (
    text.indexOf('<') < 0 &&
    text.indexOf('>') < 0 &&
    text.indexOf('&') < 0 &&
    text.indexOf('\u2028') < 0 &&
    text.indexOf('\u2029') < 0
  )
    return text;
  return text.replace(/[<>&\u2028\u2029]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
