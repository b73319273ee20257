import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SysError } from '@cnikit/sys';
import { invokeInProcess } from './dispatch.ts';
import {
  CniError,
  ErrorCode,
  ErrorList,
  errorReason,
  internalError,
  Rollback,
  wrap,
  wrapAsync,
} from './errors.ts';

describe('CniError', () => {
  test('well-known codes', () => {
    assert.deepEqual(
      [
        ErrorCode.IncompatibleCNIVersion,
        ErrorCode.UnsupportedField,
        ErrorCode.UnknownContainer,
        ErrorCode.InvalidEnvironmentVariables,
      ],
      [1, 2, 3, 4],
    );
    assert.deepEqual(
      [
        ErrorCode.IOFailure,
        ErrorCode.DecodingFailure,
        ErrorCode.InvalidNetworkConfig,
        ErrorCode.InvalidNetNS,
      ],
      [5, 6, 7, 8],
    );
    assert.deepEqual(
      [
        ErrorCode.TryAgainLater,
        ErrorCode.PluginNotAvailable,
        ErrorCode.LimitedConnectivity,
        ErrorCode.Internal,
      ],
      [11, 50, 51, 999],
    );
  });
  test('toJSON leaves out empty details', () => {
    assert.deepEqual(new CniError(7, 'm').toJSON(), { code: 7, msg: 'm' });
    assert.deepEqual(new CniError(7, 'm', 'd').toJSON(), { code: 7, msg: 'm', details: 'd' });
    assert.equal(new CniError(7, 'm', 'd').message, 'm; d');
  });
  test('from wraps exactly once', () => {
    const inner = new Error('x');
    const once = CniError.from(inner);
    assert.equal(once.code, 999);
    assert.equal(CniError.from(once), once);
    assert.equal(CniError.from('s').msg, 's');
  });
  test('branding survives a second bundled copy of the SDK (instanceof and is)', async () => {
    // a query string makes the loader evaluate a second, independent copy of the module
    const copy = (await import(`./errors.ts?copy=${Date.now()}`)) as typeof import('./errors.ts');
    assert.notEqual(copy.CniError, CniError);
    const foreign = new copy.CniError(11, 'from the other copy', 'd');
    assert.ok(foreign instanceof CniError);
    assert.ok(CniError.is(foreign));
    assert.ok(new CniError(1, 'x') instanceof copy.CniError);
    assert.ok(!(new Error('x') instanceof CniError));
    // the dispatcher passes a foreign CniError through instead of wrapping it as 999
    const r = await invokeInProcess(
      {
        name: 'x',
        add: () => {
          throw foreign;
        },
      },
      {
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: 'c',
        CNI_NETNS: '/nonexistent',
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/p',
      },
      '{"name":"n"}',
    );
    assert.deepEqual(JSON.parse(r.stdout), { code: 11, msg: 'from the other copy', details: 'd' });
  });
});

test('errorReason: the rule of @cnikit/sys SysError.reasonOf for everything but a CniError', () => {
  const cases: unknown[] = [
    new SysError(17, 'netlink', 'custom message'),
    Object.assign(new Error('EEXIST: x'), { reason: 'file exists' }),
    Object.assign(new Error('plain'), { reason: '' }),
    Object.assign(new Error('plain'), { reason: 5 }),
    new Error('plain'),
    'str',
    null,
    undefined,
  ];
  for (const c of cases) assert.equal(errorReason(c), SysError.reasonOf(c), String(c));
  assert.equal(errorReason(new SysError(17, 'netlink', 'custom message')), 'file exists');
});

test('errorReason / internalError / wrap: Go-style wrapping with the cause kept', async () => {
  const sys = Object.assign(new Error('EEXIST: x'), { reason: 'file exists' });
  assert.equal(errorReason(sys), 'file exists');
  assert.equal(errorReason(new CniError(7, 'bad', 'd')), 'bad');
  assert.equal(errorReason('str'), 'str');
  const e = internalError('m', sys);
  assert.equal(e.code, 999);
  assert.equal(e.cause, sys);
  assert.equal(
    wrap('x', () => 5),
    5,
  );
  const w = (() => {
    try {
      wrap('failed to add bridge', () => {
        throw sys;
      });
    } catch (err) {
      return err as CniError;
    }
  })();
  assert.ok(CniError.is(w));
  assert.deepEqual(w?.toJSON(), { code: 999, msg: 'failed to add bridge: file exists' });
  assert.throws(() => wrap('x', () => Promise.resolve(1)), /wrapAsync/);
  await assert.rejects(
    wrapAsync('y', async () => {
      throw sys;
    }),
    { msg: 'y: file exists' },
  );
});

test('ErrorList keeps going, prefixes, and reports every failure with the first code', async () => {
  const list = new ErrorList();
  let ran = 0;
  list.run('step one', () => {
    throw new CniError(11, 'busy');
  });
  list.run('', () => {
    ran++;
  });
  await list.run('step three', async () => {
    ran++;
    throw new Error('gone');
  });
  assert.equal(ran, 2);
  assert.equal(list.length, 2);
  assert.throws(
    () => list.throwIfAny(),
    (err: CniError) => {
      assert.deepEqual(err.toJSON(), { code: 11, msg: 'step one: busy\nstep three: gone' });
      return true;
    },
  );
  const one = new ErrorList();
  const only = new CniError(7, 'only');
  one.add(only);
  assert.throws(
    () => one.throwIfAny(),
    (err) => err === only,
  );
  new ErrorList().throwIfAny();
});

test("ErrorList formats: the plugin's own code, separator and prefix, also for one failure", () => {
  const list = new ErrorList();
  list.add(new CniError(11, 'a', 'details a'));
  assert.deepEqual(list.combined({ code: 5, separator: ';' })?.toJSON(), { code: 5, msg: 'a' });
  list.add(new Error('b'));
  assert.deepEqual(list.combined({ code: 5, separator: '; ', prefix: 'GC: ' })?.toJSON(), {
    code: 5,
    msg: 'GC: a; b',
  });
  // without a code: the first error's code and details
  assert.deepEqual(list.combined({ separator: ' | ' })?.toJSON(), {
    code: 11,
    msg: 'a | b',
    details: 'details a',
  });
  assert.ok(list.combined({ separator: ';' })?.cause instanceof AggregateError);
  assert.equal(new ErrorList().combined({ code: 5 }), undefined);
  assert.throws(
    () => list.throwIfAny({ code: 5, separator: ';' }),
    (err: CniError) => err.code === 5 && err.msg === 'a;b',
  );
});

test('Rollback undoes in reverse order, keeps going after a failure and logs it', async () => {
  const done: string[] = [];
  const warnings: string[] = [];
  const log = { warn: (msg: string, ...args: unknown[]) => warnings.push([msg, ...args].join(' | ')) };
  const r = new Rollback();
  r.push('first', () => done.push('first'));
  r.push('second', () => {
    throw new CniError(999, 'cannot');
  });
  r.push('third', async () => {
    done.push('third');
  });
  assert.equal(r.length, 3);
  await r.undoAll(log);
  assert.deepEqual(done, ['third', 'first']);
  assert.deepEqual(warnings, ['rollback: %s failed: %s | second | cannot']);
  assert.equal(r.length, 0, 'a rollback runs once');
  const s = new Rollback();
  s.push('sync', () => done.push('sync'));
  s.push('async by mistake', async () => undefined);
  s.undoAllSync(log);
  assert.deepEqual(done, ['third', 'first', 'sync']);
  assert.match(warnings[1] ?? '', /async by mistake \| asynchronous undo step/);
});
