import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createLogger, traceIdOf } from './log.ts';

function sink() {
  const lines: string[] = [];
  return { lines, write: (s: string) => lines.push(s) };
}

describe('createLogger', () => {
  test('a valid TRACEPARENT puts the trace id on every line; an invalid one is ignored', () => {
    const id = '4bf92f3577b34da6a3ce929d0e0e4736';
    const err = sink();
    const log = createLogger('p', undefined, {
      stderr: err,
      env: { TRACEPARENT: `00-${id}-00f067aa0ba902b7-01` },
    });
    log.warn('w');
    log.child('ipam').error('e');
    assert.match(err.lines[0]!, new RegExp(`WARN p\\[\\d+\\] trace=${id}: w\n$`));
    assert.match(err.lines[1]!, new RegExp(`ERROR p/ipam\\[\\d+\\] trace=${id}: e\n$`));
    for (const bad of ['00-00000000000000000000000000000000-00f067aa0ba902b7-01', 'garbage', '']) {
      const out = sink();
      createLogger('p', undefined, { stderr: out, env: { TRACEPARENT: bad } }).warn('w');
      assert.doesNotMatch(out.lines[0]!, /trace=/, bad);
      assert.equal(traceIdOf(bad), undefined);
    }
  });

  test('default level warn, stderr only, formatted', () => {
    const err = sink();
    const log = createLogger('p', undefined, { stderr: err, env: {} });
    log.debug('d');
    log.info('i');
    log.warn('w %d', 1);
    log.error('e %s', 'x');
    assert.equal(err.lines.length, 2);
    assert.match(err.lines[0]!, /^\S+ WARN p\[\d+\]: w 1\n$/);
    assert.match(err.lines[1]!, /ERROR p\[\d+\]: e x\n$/);
  });
  test('level and file from config keys (case-insensitive) or env', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-log-'));
    try {
      const f1 = join(dir, 'a.log');
      const err = sink();
      const log = createLogger('p', { LogFile: f1, logLevel: 'DEBUG' }, { stderr: err, env: {} });
      log.debug('hello');
      assert.equal(log.level, 'debug');
      assert.match(readFileSync(f1, 'utf8'), /DEBUG p\[\d+\]: hello\n/);
      assert.equal(err.lines.length, 1);
      const f2 = join(dir, 'b.log');
      const log2 = createLogger('q', undefined, {
        stderr: sink(),
        env: { CNIKIT_LOG_FILE: f2, CNIKIT_LOG_LEVEL: 'info' },
      });
      log2.info('from env');
      log2.debug('hidden');
      assert.equal(readFileSync(f2, 'utf8').trim().split('\n').length, 1);
      const quiet = sink();
      createLogger('r', undefined, { stderr: quiet, env: { CNIKIT_LOG_LEVEL: 'none' } }).error('x');
      assert.equal(quiet.lines.length, 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  test('an unwritable log file or a broken stderr never throws', () => {
    const log = createLogger('p', undefined, {
      logFile: '/nonexistent/dir/x.log',
      stderr: {
        write() {
          throw new Error('closed');
        },
      },
      env: {},
    });
    assert.doesNotThrow(() => log.error('x'));
  });
  test('child logger prefixes the name', () => {
    const err = sink();
    createLogger('p', undefined, { stderr: err, env: {} }).child('ipam').warn('w');
    assert.match(err.lines[0]!, /WARN p\/ipam\[/);
  });
});

describe('createLogger: JSON format', () => {
  const id = '4bf92f3577b34da6a3ce929d0e0e4736';
  const env = {
    TRACEPARENT: `00-${id}-00f067aa0ba902b7-01`,
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'ctr-9',
  };

  test('logFormat json (config key, any case) or CNIKIT_LOG_FORMAT=json: one object per line with trace, plugin, verb, container', () => {
    for (const [config, e] of [
      [{ logFormat: 'json' }, env],
      [{ LogFormat: 'JSON' }, env],
      [undefined, { ...env, CNIKIT_LOG_FORMAT: 'json' }],
    ] as const) {
      const err = sink();
      const log = createLogger('bridge', config, { stderr: err, env: e });
      assert.equal(log.format, 'json');
      log.warn('veth %s: "%s"', 'v1', 'q');
      log.child('ipam').error('x\ny');
      assert.equal(err.lines.length, 2);
      for (const l of err.lines) assert.ok(l.endsWith('}\n') && l.split('\n').length === 2, l);
      const a = JSON.parse(err.lines[0]!);
      assert.match(a.time, /^\d{4}-\d\d-\d\dT/);
      assert.deepEqual(
        { ...a, time: undefined },
        {
          time: undefined,
          level: 'warn',
          plugin: 'bridge',
          pid: process.pid,
          trace_id: id,
          span_id: '00f067aa0ba902b7',
          verb: 'ADD',
          container_id: 'ctr-9',
          msg: 'veth v1: "q"',
        },
      );
      const b = JSON.parse(err.lines[1]!);
      assert.equal(b.plugin, 'bridge/ipam');
      assert.equal(b.msg, 'x\ny');
      assert.equal(b.level, 'error');
    }
  });

  test('text stays the default; the config key wins over the environment; unknown values are ignored', () => {
    const err = sink();
    const log = createLogger(
      'p',
      { logFormat: 'text' },
      { stderr: err, env: { ...env, CNIKIT_LOG_FORMAT: 'json' } },
    );
    assert.equal(log.format, 'text');
    log.warn('w');
    assert.match(err.lines[0]!, / WARN p\[\d+\] trace=4bf9.*: w\n$/);
    assert.equal(createLogger('p', { logFormat: 'xml' }, { env: {} }).format, 'text');
    assert.equal(createLogger('p', undefined, { env: { CNIKIT_LOG_FORMAT: 'yaml' } }).format, 'text');
    const noCtx = sink();
    createLogger('p', undefined, { stderr: noCtx, env: { CNIKIT_LOG_FORMAT: 'json' } }).error('e');
    assert.deepEqual(Object.keys(JSON.parse(noCtx.lines[0]!)), ['time', 'level', 'plugin', 'pid', 'msg']);
  });
});
