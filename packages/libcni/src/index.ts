export * from './runtime.ts';
