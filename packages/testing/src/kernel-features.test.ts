import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { KERNEL_FEATURES, parseKernelFeaturesMarker } from './kernel-features.ts';

describe('parseKernelFeaturesMarker', () => {
  test('the names of the marker line, in order', () => {
    assert.deepEqual(
      parseKernelFeaturesMarker('// cnikit-kernel-features: macvlan ipvlan\nimport x from "y";\n'),
      ['macvlan', 'ipvlan'],
    );
    assert.deepEqual(
      parseKernelFeaturesMarker('// cnikit-kernel-features:   vlan    bridge-vlan-filtering  \n'),
      ['vlan', 'bridge-vlan-filtering'],
    );
  });

  test('found among the leading comment lines (after a shebang, other comments and blank lines)', () => {
    const src =
      '#!/usr/bin/env node\n// Tests of X.\n\n// cnikit-kernel-features: dummy\n// more\nimport "a";\n';
    assert.deepEqual(parseKernelFeaturesMarker(src), ['dummy']);
  });

  test('no marker: none; a marker below the first code line does not count', () => {
    assert.deepEqual(parseKernelFeaturesMarker('import "a";\n'), []);
    assert.deepEqual(parseKernelFeaturesMarker(''), []);
    assert.deepEqual(parseKernelFeaturesMarker('import "a";\n// cnikit-kernel-features: dummy\n'), []);
    assert.deepEqual(parseKernelFeaturesMarker('/* cnikit-kernel-features: dummy */\n'), []);
  });

  test('an unknown name or an empty list is an error naming the file (a typo must not pick the wrong kernel)', () => {
    assert.throws(
      () => parseKernelFeaturesMarker('// cnikit-kernel-features: macvlan mcvlan\n', 'a.kernel.test.ts'),
      {
        message: /^a\.kernel\.test\.ts: unknown kernel feature "mcvlan" \(known: dummy, vlan, /,
      },
    );
    assert.throws(() => parseKernelFeaturesMarker('// cnikit-kernel-features:   \n', 'b.ts'), {
      message: 'b.ts: empty cnikit-kernel-features line',
    });
    // inherited object keys are not feature names
    assert.throws(
      () => parseKernelFeaturesMarker('// cnikit-kernel-features: toString\n'),
      /unknown kernel feature/,
    );
  });

  test('every feature has a description and at least one probe step with ip or tc', () => {
    for (const [name, f] of Object.entries(KERNEL_FEATURES)) {
      assert.match(name, /^[a-z0-9_-]+$/);
      assert.ok(f.description.length > 5, name);
      assert.ok(f.steps.length > 0, name);
      for (const [tool] of f.steps) assert.ok(tool === 'ip' || tool === 'tc', `${name}: ${tool}`);
    }
  });
});
