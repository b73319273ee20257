import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { reexecArgs } from './cli.ts';

test('the re-run gets --config and --fixtures as absolute paths, in both forms', () => {
  assert.deepEqual(
    reexecArgs([
      '--plugin',
      'p',
      '--config',
      'a.conflist',
      '--fixtures=f.json',
      '--config=b.conflist',
      '--fixtures',
      '/abs/f.json',
      '--skip',
      'concurrency=one device',
      '--json',
    ]),
    [
      '--plugin',
      'p',
      '--config',
      resolve('a.conflist'),
      `--fixtures=${resolve('f.json')}`,
      `--config=${resolve('b.conflist')}`,
      '--fixtures',
      '/abs/f.json',
      '--skip',
      'concurrency=one device',
      '--json',
    ],
  );
});

test('arguments other than the files are passed as given', () => {
  assert.deepEqual(reexecArgs(['--only', 'add.*', '--junit', 'r.xml', '--host-link', 'par0:dummy']), [
    '--only',
    'add.*',
    '--junit',
    'r.xml',
    '--host-link',
    'par0:dummy',
  ]);
});
