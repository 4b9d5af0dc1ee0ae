// The typed client's package (sdk/): its types are generated from openapi.json and the committed
// sdk/src/generated.ts is exactly what the generator makes of the committed document (regenerate
// with `npm --prefix sdk run generate` after `npm run openapi`); every named schema is a named
// type and every operation a method; the package builds with tsc into sdk/dist (this is where CI
// builds it), has no runtime dependency, its built JavaScript works against a real gateway, and
// its declarations type a consumer's calls (a wrong call does not compile).
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { GENERATED_FILE, OPENAPI_FILE, type OpenApiDocument, REPO_ROOT, generate, renderClient } from '../../sdk/scripts/generate.js'
import { MeteringClient, OPERATIONS } from '../../sdk/src/index.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'

const SDK = path.join(REPO_ROOT, 'sdk')
const TSC = path.join(REPO_ROOT, 'node_modules/.bin/tsc')
const doc = JSON.parse(readFileSync(OPENAPI_FILE, 'utf8')) as OpenApiDocument

describe('generated from openapi.json', () => {
  test('sdk/src/generated.ts is what the generator makes of openapi.json (else: npm --prefix sdk run generate)', () => {
    const committed = readFileSync(GENERATED_FILE, 'utf8')
    expect(committed === generate(), 'sdk/src/generated.ts is stale: run `npm --prefix sdk run generate` and commit it').toBe(true)
  })

  test('every schema of components.schemas is an exported type of its own name', () => {
    const source = readFileSync(GENERATED_FILE, 'utf8')
    const names = Object.keys(doc.components.schemas)
    expect(names.length).toBeGreaterThan(50)
    const missing = names.filter((name) => !new RegExp(`^export (interface|type) ${name}\\b`, 'm').test(source))
    expect(missing).toEqual([])
  })

  test('every operation is a method of the client at its operationId, and in OPERATIONS with its method and path', () => {
    const client = new MeteringClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'mk_x' }) as unknown as Record<string, any>
    const operations = Object.entries(doc.paths).flatMap(([p, item]) => Object.entries(item).map(([method, op]) => ({ id: op.operationId!, method, path: p })))
    expect(operations.length).toBeGreaterThan(30)
    for (const op of operations) {
      const method = op.id.split('.').reduce((node, part) => node?.[part], client)
      expect(typeof method, op.id).toBe('function')
      expect(OPERATIONS[op.id as keyof typeof OPERATIONS]).toMatchObject({ method: op.method.toUpperCase(), path: op.path })
    }
    expect(Object.keys(OPERATIONS).sort()).toEqual(operations.map((o) => o.id).sort())
  })

  test('a request body, a query and an answer get named types; an unknown $ref fails the generation', () => {
    const source = readFileSync(GENERATED_FILE, 'utf8')
    expect(source).toMatch(/^export interface BudgetsAuthorizeRequest \{/m)
    expect(source).toMatch(/^export type BudgetsAuthorizeResponse = Hold$/m)
    expect(source).toMatch(/^export interface WalletBalanceQuery \{/m)
    expect(source).toMatch(/authorize: \(body: BudgetsAuthorizeRequest, options\?: CallOptions\): Promise<BudgetsAuthorizeResponse>/)
    const broken = structuredClone(doc)
    broken.components.schemas.Hold = { $ref: '#/components/schemas/Nope' }
    expect(() => renderClient(broken)).toThrow('unresolved $ref #/components/schemas/Nope')
  })
})

describe('the package', () => {
  let gw: TestGateway
  let tmp: string
  beforeAll(async () => {
    rmSync(path.join(SDK, 'dist'), { recursive: true, force: true })
    const build = spawnSync(TSC, ['-p', path.join(SDK, 'tsconfig.json')], { cwd: SDK, encoding: 'utf8' })
    expect(build.status, `${build.stdout}${build.stderr}`).toBe(0)
    gw = await startTestGateway()
    tmp = mkdtempSync(path.join(os.tmpdir(), 'sdk-consumer-'))
  })
  afterAll(async () => {
    await gw?.close()
    if (tmp) rmSync(tmp, { recursive: true, force: true })
  })

  test('builds into sdk/dist with declarations, and depends on nothing at run time', () => {
    for (const file of ['index.js', 'index.d.ts', 'generated.js', 'client.d.ts']) expect(existsSync(path.join(SDK, 'dist', file)), file).toBe(true)
    const pkg = JSON.parse(readFileSync(path.join(SDK, 'package.json'), 'utf8'))
    expect(pkg).toMatchObject({ name: '@metering/client', type: 'module', main: './dist/index.js', types: './dist/index.d.ts' })
    expect(pkg.dependencies ?? {}).toEqual({})
    expect(pkg.devDependencies ?? {}).toEqual({})
  })

  test('the built JavaScript: a hold settled, a 402 as BudgetExceededError', async () => {
    const sdk = await import(pathToFileURL(path.join(SDK, 'dist/index.js')).href)
    const { apiKey } = await gw.project()
    const client = new sdk.MeteringClient({ baseUrl: gw.url, apiKey })
    await client.budgets.upsert({ key: 'b', limits: [{ id: 'total', window: 'never', enforce: 'hard', amount: '1' }] })
    const done = await client.hold('b', '0.5', () => ({ cost: '0.3', value: 'ok' }))
    expect(done).toMatchObject({ value: 'ok', settled: { state: 'settled', settledAmount: '0.3' } })
    const err = await client.hold('b', '0.8', () => ({ cost: '0' })).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(sdk.BudgetExceededError)
    expect(err).toMatchObject({ status: 402, remedy: 'raise_limit', blocked: { limitId: 'total', remaining: '0.7' } })
  })

  test("the declarations type a consumer's calls: right ones compile, wrong ones do not", () => {
    const entry = pathToFileURL(path.join(SDK, 'dist/index.js')).href
    writeFileSync(
      path.join(tmp, 'consumer.ts'),
      [
        `import { BudgetExceededError, MeteringClient, type Hold, type Remedy } from ${JSON.stringify(entry.replace('file://', ''))}`,
        `const client = new MeteringClient({ baseUrl: 'http://localhost:8787', apiKey: 'mk_x' })`,
        `export async function ok(): Promise<Hold> {`,
        `  const r = await client.hold('b', '1', async (h) => ({ cost: h.amount, value: h.holdId.length }))`,
        `  const n: number | undefined = r.value`,
        `  void n`,
        `  try { return await client.budgets.authorize({ key: 'b', amount: '1', idempotencyKey: 'k' }) }`,
        `  catch (e) { if (e instanceof BudgetExceededError) { const remedy: Remedy | undefined = e.remedy; void remedy }; throw e }`,
        `}`,
        `export async function wrong(): Promise<void> {`,
        `  // @ts-expect-error amount and idempotencyKey are required`,
        `  await client.budgets.authorize({ key: 'b' })`,
        `  // @ts-expect-error window is one of hour, day, week, month, never`,
        `  await client.budgets.upsert({ key: 'b', limits: [{ id: 'x', window: 'fortnight', enforce: 'hard', amount: '1' }] })`,
        `  // @ts-expect-error runs.get takes the run id first`,
        `  await client.runs.get({ runId: 'r' })`,
        `  const hold = await client.budgets.authorize({ key: 'b', amount: '1', idempotencyKey: 'k' })`,
        `  // @ts-expect-error amounts are decimal strings, never numbers`,
        `  const amount: number = hold.amount`,
        `  void amount`,
        `}`,
        '',
      ].join('\n'),
    )
    writeFileSync(
      path.join(tmp, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2023', 'DOM'], types: [], strict: true, noEmit: true },
        files: ['consumer.ts'],
      }),
    )
    const check = spawnSync(TSC, ['-p', path.join(tmp, 'tsconfig.json')], { cwd: tmp, encoding: 'utf8' })
    expect(check.status, `${check.stdout}${check.stderr}`).toBe(0)
  })
})
