// Benchmark entry point: `npm run bench -- <scenario> [options]`.
//
// Prints figures and writes them to bench/results/; it is a measurement, not
// a pass/fail test (targets are labelled PASS/MISS for information and the
// exit code does not depend on them).

import { OPTIONS_HELP, parseOptions, type BenchOptions } from './lib/options.js';
import { stopAll } from './lib/proc.js';

// Scenarios are loaded lazily so one scenario's imports cannot break another.
const SCENARIOS: Record<string, { about: string; run: (o: BenchOptions) => Promise<void> }> = {
  authorize: {
    about: 'authorize (+settle) through the gateway vs a uWS hello-world vs Fastify+rate-limiter-flexible',
    run: async (o) => (await import('./authorize.js')).runAuthorize(o),
  },
  // ingest: to come.
};

function usage(): string {
  const list = Object.entries(SCENARIOS)
    .map(([name, s]) => `  ${name.padEnd(10)} ${s.about}`)
    .join('\n');
  return `usage: npm run bench -- <scenario> [options]\n\nscenarios:\n${list}\n\n${OPTIONS_HELP}`;
}

async function main(): Promise<number> {
  const [name, ...rest] = process.argv.slice(2);
  if (name === '-h' || name === '--help') {
    console.log(usage());
    return 0;
  }
  const scenario = name ? SCENARIOS[name] : undefined;
  if (!scenario) {
    console.error(`${name ? `unknown scenario: ${name}\n\n` : ''}${usage()}`);
    return 2;
  }
  let opts: BenchOptions;
  try {
    opts = parseOptions(rest);
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${usage()}`);
    return 2;
  }
  if (opts.pipelining !== 1) {
    console.warn(
      `warning: pipelining ${opts.pipelining}: uWS does not pipeline async responses and settle needs the ` +
        `authorize's holdId first, so figures will not be comparable; use -p 1`,
    );
  }
  // Ctrl-C: stop the servers we started before leaving.
  process.once('SIGINT', () => {
    void stopAll().finally(() => process.exit(130));
  });
  await scenario.run(opts);
  return 0;
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    await stopAll();
    process.exit(1);
  },
);
