import { defineConfig } from 'vitest/config'

// Options every project repeats. Projects do not `extends: true` the root on
// purpose: that would copy the root globalSetup into each project and start
// one set of Redis servers per project instead of one for the whole run.
const shared = {
  // Child processes rather than worker threads: tests start redis-servers
  // and other children, and a crashing native addon takes down only its fork.
  pool: 'forks',
  testTimeout: 30_000,
  hookTimeout: 60_000,
} as const

const projects = ['unit', 'integration', 'property', 'faults'] as const

export default defineConfig({
  test: {
    // Runs once for the run (see test/support/globalSetup.ts); its provided
    // values reach every project.
    globalSetup: ['test/support/globalSetup.ts'],
    // Some project folders have no tests yet; that is not a failure.
    passWithNoTests: true,
    teardownTimeout: 20_000,
    projects: projects.map((name) => ({
      test: { name, include: [`test/${name}/**/*.test.ts`], ...shared },
    })),
  },
})
