export * from './netns.ts';
export * from './sysctl.ts';
