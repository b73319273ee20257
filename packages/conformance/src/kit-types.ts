/** The records of a kit run (kit.ts) that its outputs (report.ts) read. */
export type Status = 'pass' | 'fail' | 'skip';

/** One plugin call, enough to repeat it by hand. */
export interface CallRecord {
  plugin: string;
  env: Record<string, string>;
  stdin: string;
  code: number;
  stdout: string;
  stderr: string;
}

export interface CheckResult {
  id: string;
  status: Status;
  /** pass: what was seen; skip: why; fail: expected, actual and how to reproduce. */
  detail: string;
  title: string;
  spec: string;
  durationMs: number;
  /** fail: the call(s) that show the failure. */
  repro?: CallRecord[];
}

export interface Report {
  plugin: string;
  /** The `type` of the plugin under test in the list and its position. */
  type: string;
  network: string;
  cniVersion: string;
  /** VERSION's supportedVersions of the plugin under test. */
  supportedVersions: string[];
  /**
   * The runtimeConfig the kit supplied for capabilities the list declares without a runtimeConfig for them (the
   * kit's samples, as a runtime passes capability arguments): one entry per plugin type and capability.
   */
  suppliedRuntimeConfig: Array<{ type: string; capability: string; value: unknown }>;
  results: CheckResult[];
  counts: Record<Status, number>;
  durationMs: number;
}
