export * from './errors.ts';
export * from './types.ts';
