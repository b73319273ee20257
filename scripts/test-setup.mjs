// Preloaded into every test process by scripts/run-tests.mjs (`--import`).
//
// A failing `assert.ok(value)` without a message makes Node read the calling source file to quote the expression;
// for a test file transformed by tsx (the whole module on one line, so the call site is at line 1, column N) that
// lookup recurses through the file and spins at 100% CPU for minutes — the test never ends. Give every message-less
// assert.ok / assert(...) a message up front, so a failure is reported at once.
import assert from 'node:assert';
import { inspect } from 'node:util';

for (const target of [assert, assert.strict]) {
  const original = target.ok;
  target.ok = function ok(value, ...rest) {
    if (rest.length === 0 && !value) {
      return original.call(this, value, `assert.ok failed: the value is ${inspect(value)}`);
    }
    return original.call(this, value, ...rest);
  };
}
