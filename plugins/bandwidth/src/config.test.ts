import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { goUint32, parseConf, tbfParams, validateRateAndBurst } from './config.ts';

describe('bandwidth config', () => {
  test('top-level keys win over runtimeConfig as soon as one is present (even null or 0)', () => {
    const rc = { runtimeConfig: { bandwidth: { ingressRate: 8, ingressBurst: 8 } } };
    assert.equal(parseConf({ name: 'n', ...rc }).bandwidth?.ingressRate, 8);
    assert.equal(parseConf({ name: 'n', egressRate: 0, ...rc }).bandwidth?.ingressRate, 0);
    assert.equal(parseConf({ name: 'n', EGRESSRATE: null, ...rc }).bandwidth?.ingressRate, 0);
    assert.equal(parseConf({ name: 'n' }).bandwidth, undefined);
    assert.equal(parseConf({ name: 'n', runtimeConfig: { bandwidth: null } }).bandwidth, undefined);
  });

  test('validateRateAndBurst (upstream vectors)', () => {
    assert.doesNotThrow(() => validateRateAndBurst(1, 34_359_738_352)); // 4 GiB − 16 bits
    assert.throws(() => validateRateAndBurst(1, 34_359_738_360), /burst cannot be more than 4GB/);
    assert.throws(() => validateRateAndBurst(0, 1), /if burst is set, rate must also be set/);
    assert.throws(() => validateRateAndBurst(1, 0), /if rate is set, burst must also be set/);
    assert.doesNotThrow(() => validateRateAndBurst(0, 0));
  });

  test('TBF arithmetic as the reference (tick 15.625 µs⁻¹: /proc/net/psched 000003e8 00000040 000f4240 3b9aca00)', () => {
    const tick = 1000 / 64;
    // upstream: ingress 8 bit/s & burst 8 bit → rate 1 B/s, limit 1; egress 16 bit/s → rate 2, limit 1
    assert.deepEqual(tbfParams(8, 8, tick), { rate: 1, limit: 1, buffer: 15_625_000 });
    assert.deepEqual(tbfParams(16, 8, tick), { rate: 2, limit: 1, buffer: 7_812_500 });
    assert.deepEqual(tbfParams(8_000_000, 800_000, tick), {
      rate: 1_000_000,
      limit: 125_000,
      buffer: 1_562_500,
    });
    // containerd's MaxUint32-bit bursts: Go's uint32(float64) keeps the low 32 bits of the truncated value
    assert.deepEqual(tbfParams(2_000_000, 4_294_967_295, tick), {
      rate: 250_000,
      limit: 536_877_161,
      buffer: goUint32(2_147_483_644 * tick),
    });
    assert.equal(goUint32(33_554_431_937.5), 3_489_660_865);
    assert.equal(goUint32(Number.POSITIVE_INFINITY), 0);
  });
});
