// The layering of src/ (README "Architecture"), checked on the import statements themselves:
// each layer imports only itself and the layers above it, a domain never reaches into another
// domain's storage adapters, nothing outside the entry points imports http/ from below it, and
// no file takes part in an import cycle.
import { readFileSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { REPO_ROOT } from '../support/processes.js'

type Layer = 'kernel' | 'infra' | 'domain' | 'usecases' | 'http' | 'workers' | 'container' | 'bin'

/** What each layer may import (itself included); bin/ is the composition root and may import all. */
const ALLOWED: Record<Layer, readonly Layer[]> = {
  kernel: ['kernel'],
  infra: ['kernel', 'infra'],
  domain: ['kernel', 'infra', 'domain'],
  usecases: ['kernel', 'infra', 'domain', 'usecases'],
  http: ['kernel', 'infra', 'domain', 'usecases', 'http'],
  workers: ['kernel', 'infra', 'domain', 'usecases', 'workers'],
  container: ['kernel', 'infra', 'domain', 'usecases', 'http', 'workers', 'container'],
  bin: ['kernel', 'infra', 'domain', 'usecases', 'http', 'workers', 'container', 'bin'],
}

/** A domain's storage adapters: only the domain itself may import them. */
const STORAGE = new Set(['redis.ts', 'clickhouse.ts'])

function layerOf(file: string): Layer {
  const [top, rest] = [file.split('/')[1]!, file.split('/').slice(2)]
  if (file === 'src/container.ts') return 'container'
  if (top === 'kernel' || top === 'infra' || top === 'usecases' || top === 'http' || top === 'workers' || top === 'bin') return top
  if (rest.length === 0) throw new Error(`${file}: a file at the top of src/ belongs to no layer`)
  return 'domain'
}

type Graph = Map<string, string[]>

/** Every rule a file's imports break, as sentences. */
function ruleBreaks(graph: Graph): string[] {
  const breaks: string[] = []
  for (const [file, deps] of graph) {
    const layer = layerOf(file)
    for (const dep of deps) {
      const depLayer = layerOf(dep)
      if (!ALLOWED[layer].includes(depLayer)) breaks.push(`${file} (${layer}) imports ${dep} (${depLayer})`)
      const [, domain, ...inner] = file.split('/')
      const [, depDomain] = dep.split('/')
      if (layer === 'domain' && depLayer === 'domain' && depDomain !== domain && STORAGE.has(path.basename(dep)) && inner.length > 0) {
        breaks.push(`${file} reaches into another domain's storage: ${dep}`)
      }
    }
  }
  return breaks
}

/** The import cycles, each as its files (Tarjan's strongly connected components). */
function cycles(graph: Graph): string[][] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  let next = 0
  const visit = (v: string): void => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) !== index.get(v)) return
    const component: string[] = []
    let w: string
    do {
      w = stack.pop()!
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort())
  }
  for (const v of graph.keys()) if (!index.has(v)) visit(v)
  return found
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(`${dir}/${e.name}`) : e.name.endsWith('.ts') ? [`${dir}/${e.name}`] : [],
  )
}

function importGraph(): Graph {
  const graph: Graph = new Map()
  for (const file of sourceFiles('src')) {
    const text = readFileSync(path.join(REPO_ROOT, file), 'utf8')
    const deps = [...text.matchAll(IMPORT)].map((m) => path.posix.normalize(path.posix.join(path.posix.dirname(file), m[1] ?? m[2]!)).replace(/\.js$/, '.ts'))
    graph.set(file, [...new Set(deps)])
  }
  return graph
}

describe('architecture', () => {
  const graph = importGraph()

  it('reads the imports of every source file', () => {
    expect(graph.size).toBeGreaterThan(100)
    expect(graph.get('src/bin/gateway.ts')).toContain('src/container.ts')
  })

  it("each layer imports only itself and the layers above it; no domain reaches into another domain's storage", () => {
    expect(ruleBreaks(graph)).toEqual([])
  })

  it('no import cycle', () => {
    expect(cycles(graph)).toEqual([])
  })

  it('the checks find what they look for', () => {
    const bad: Graph = new Map([
      ['src/kernel/money.ts', ['src/http/app.ts']],
      ['src/http/app.ts', ['src/kernel/money.ts']],
      ['src/invoices/service.ts', ['src/catalog/redis.ts']],
      ['src/workers/ingest.ts', ['src/http/route.ts']],
    ])
    expect(ruleBreaks(bad)).toEqual([
      'src/kernel/money.ts (kernel) imports src/http/app.ts (http)',
      "src/invoices/service.ts reaches into another domain's storage: src/catalog/redis.ts",
      'src/workers/ingest.ts (workers) imports src/http/route.ts (http)',
    ])
    expect(cycles(bad)).toEqual([['src/http/app.ts', 'src/kernel/money.ts']])
  })

  it('the Redis key prefix is written in one place (src/infra/redis/keys.ts)', () => {
    const code = (f: string) => readFileSync(path.join(REPO_ROOT, f), 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '')
    const writers = sourceFiles('src').filter((f) => /['"`/]\^?mg:/.test(code(f)))
    expect(writers).toEqual(['src/infra/redis/keys.ts'])
  })
})
