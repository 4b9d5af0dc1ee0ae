// docker-compose.yml is for users with a Docker engine, which our machines do not run: this test
// keeps it true to the code instead. Every server a process needs is health-checked and waited
// for as healthy; every service restarts; every variable the compose file sets is one the config
// reads; each process gets what it refuses to start without; the stop grace outlasts the shutdown
// deadline; the processes are node itself (PID 1), so SIGTERM reaches their graceful stop.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { parse } from 'yaml'
import { describe, expect, test } from 'vitest'
import { loadConfig } from '../../src/kernel/config.js'
import { REPO_ROOT } from '../support/processes.js'

interface Service {
  image?: string
  build?: string
  command?: string[]
  environment?: Record<string, string>
  restart?: string
  healthcheck?: { test: string[] }
  depends_on?: Record<string, { condition: string }>
  stop_grace_period?: string
}

const compose = parse(readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, Service> }
const services = compose.services
const source = (file: string) => readFileSync(path.join(REPO_ROOT, file), 'utf8')
/** Every environment variable the service reads: config.ts, and the few read where they are used. */
const knownVariables = new Set(
  ['src/kernel/config.ts', 'src/events/options.ts', 'src/notifications/options.ts'].flatMap((f) =>
    [...source(f).matchAll(/env\.([A-Z][A-Z0-9_]+)|\(\s*'([A-Z][A-Z0-9_]+)'/g)].map((m) => (m[1] ?? m[2])!),
  ),
)
const seconds = (duration: string) => Number(/^(\d+)s$/.exec(duration)?.[1] ?? Number.NaN)

describe('docker-compose.yml', () => {
  test('every service restarts on failure', () => {
    for (const [name, service] of Object.entries(services)) expect(service.restart, name).toBe('unless-stopped')
  })

  test('the servers and the gateway are health-checked, and what depends on them waits until they are healthy', () => {
    for (const name of ['redis', 'clickhouse', 'gateway']) expect(services[name]?.healthcheck?.test.length, name).toBeGreaterThan(0)
    expect(services.gateway!.healthcheck!.test.join(' ')).toContain('/readyz')
    for (const name of ['gateway', 'worker']) {
      const dependsOn = services[name]!.depends_on ?? {}
      for (const server of ['redis', 'clickhouse']) expect(dependsOn[server]?.condition, `${name} → ${server}`).toBe('service_healthy')
      for (const [dependency, { condition }] of Object.entries(dependsOn)) {
        if (condition === 'service_healthy') expect(services[dependency]?.healthcheck, `${name} waits for ${dependency} to be healthy`).toBeDefined()
      }
    }
  })

  test('each process gets the variables it needs, and only variables the code reads', () => {
    // src/bin/worker.ts exits without REDIS_URL and CLICKHOUSE_URL; the gateway would otherwise embed its own.
    for (const name of ['gateway', 'worker']) {
      const env = services[name]!.environment ?? {}
      expect(env.REDIS_URL, name).toBe('redis://redis:6379')
      expect(env.CLICKHOUSE_URL, name).toBe('http://clickhouse:8123')
      for (const variable of Object.keys(env)) expect(knownVariables.has(variable), `${name}: ${variable} is read by the code`).toBe(true)
    }
    expect(services.gateway!.environment!.METERING_ROOT_KEY).toBeDefined()
    expect(services.redis!.command).toEqual(expect.arrayContaining(['--appendonly', 'yes', '--appendfsync', 'always']))
  })

  test('SIGTERM reaches node itself, and the stop grace outlasts the shutdown deadline', () => {
    expect(source('Dockerfile')).toMatch(/CMD \["node", "--import", "tsx", "src\/bin\/gateway\.ts"\]/)
    expect(services.worker!.command).toEqual(['node', '--import', 'tsx', 'src/bin/worker.ts'])
    for (const name of ['gateway', 'worker']) {
      const env = services[name]!.environment!
      const deadlineMs = loadConfig({ METERING_SHUTDOWN_MS: env.METERING_SHUTDOWN_MS }).shutdownDeadlineMs
      expect(seconds(services[name]!.stop_grace_period ?? '10s') * 1000, name).toBeGreaterThan(deadlineMs)
    }
  })
})
