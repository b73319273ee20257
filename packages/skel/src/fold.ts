/**
 * Go's case folding for JSON keys (simple Unicode folding ≈ lower-casing; U+017F long s folds to
 * 's' and U+212A Kelvin to 'k', as in Go).
 */
export function foldKey(s: string): string {
  return s.toLowerCase().replace(/\u017f/g, 's');
}
