import type { Plugin } from '@cnikit/skel';
export const plugin: Plugin = { name: 'loopback', about: 'CNI loopback plugin cnikit 0.1.0' };
