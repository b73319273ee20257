/**
 * @cnikit/skel/go — how Go prints and parses, for code that must match the reference byte for byte: `%q`
 * (`goQuote`, `goQuoteList`, and back: `goUnquote`), `%v` of a []string (`goList`), encoding/json's map order and escaping
 * (`sortKeysDeep`, `goEscapeJSON`, `goMarshal`), its error texts (`parseJsonGo`, `goKind`, `goJsonSyntaxErrorPosition`) and its case-insensitive
 * key matching (`foldKey`). One home for these helpers; skel's own code uses the same functions.
 */
export {
  goEscapeJSON,
  goJsonSyntaxErrorPosition,
  goKind,
  goList,
  goMarshal,
  parseJsonGo,
  sortKeysDeep,
} from './gojson.ts';
export { foldKey } from './schema.ts';
export { goQuote, goQuoteList, goUnquote } from './version.ts';
