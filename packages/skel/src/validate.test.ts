import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from './errors.ts';
import {
  interfaceNameProblem,
  MAX_CONTAINER_ID_LENGTH,
  validateContainerID,
  validateInterfaceName,
} from './validate.ts';

describe('interfaceNameProblem (the reference CNI_IFNAME rule set)', () => {
  const cases: [string, string | undefined][] = [
    ['eth0', undefined],
    ['a'.repeat(15), undefined],
    ['é'.repeat(7), undefined], // 14 bytes
    ['', 'is empty'],
    ['a'.repeat(16), 'is longer than 15 bytes'],
    ['é'.repeat(8), 'is longer than 15 bytes'], // 8 characters, 16 bytes
    ['.', 'is . or ..'],
    ['..', 'is . or ..'],
    ['...', undefined],
    ['a/b', 'contains / or : or whitespace characters'],
    ['a:b', 'contains / or : or whitespace characters'],
    ['a b', 'contains / or : or whitespace characters'],
    ['a\tb', 'contains / or : or whitespace characters'],
    ['a\u0085b', 'contains / or : or whitespace characters'], // Go unicode.IsSpace
    ['a\u3000b', 'contains / or : or whitespace characters'],
    ['a\ufeffb', undefined], // not a Go space
  ];
  for (const [name, problem] of cases) {
    test(JSON.stringify(name), () => assert.equal(interfaceNameProblem(name), problem));
  }
});

describe('validateInterfaceName wording (CNI_IFNAME)', () => {
  const err = (name: string): CniError => {
    try {
      validateInterfaceName(name);
    } catch (e) {
      assert.ok(e instanceof CniError);
      return e;
    }
    assert.fail(`accepted ${JSON.stringify(name)}`);
  };
  test('valid names pass', () => assert.equal(validateInterfaceName('eth0'), undefined));
  test('errors are code 4 with the reference texts', () => {
    assert.deepEqual([err('').code, err('').msg], [4, 'interface name is empty']);
    const long = err('a'.repeat(16));
    assert.deepEqual(
      [long.code, long.msg, long.details],
      [4, 'interface name is too long', 'interface name should be less than 16 characters'],
    );
    assert.equal(err('..').msg, 'interface name is . or ..');
    assert.equal(err('a:b').msg, 'interface name contains / or : or whitespace characters');
  });
});

test('container IDs: ADD accepts up to 128 bytes and refuses longer ones with code 4; DEL/CHECK accept any length', () => {
  validateContainerID('a'.repeat(MAX_CONTAINER_ID_LENGTH));
  assert.throws(
    () => validateContainerID('a'.repeat(MAX_CONTAINER_ID_LENGTH + 1), 'ADD'),
    (e: CniError) =>
      e.code === 4 &&
      e.msg === 'containerID is too long' &&
      e.details.startsWith('129 bytes; cnikit plugins accept at most 128'),
  );
  validateContainerID('a'.repeat(5000), 'DEL');
  validateContainerID('a'.repeat(5000), 'CHECK');
});
